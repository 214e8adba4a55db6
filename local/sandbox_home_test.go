package local

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSandboxedDesktop_PersistentHomeBound: a persistent member's home
// from before bounds moves into a 16 MiB image of its own (root's, 0600),
// a fill from the desktop's terminal stops at the bound, and the home survives a restart of the desktop and
// of the host (the image mounted again).
func TestSandboxedDesktop_PersistentHomeBound(t *testing.T) {
	s := MustSandbox(t, "202400-202499", Limits{NProc: 300, Home: 16 << 20})
	if m := s.HomeMissing(); m != "" {
		t.Skip(m)
	}
	spec := MustSandboxedSpec(t, s, "keep")
	member := filepath.Dir(spec.Dir)
	t.Cleanup(func() { unmountMember(member) })
	if err := os.MkdirAll(spec.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec.Home, "notes.txt"), []byte("kept-41\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := MustStartDesktop(t, spec)
	if !isMountpoint(spec.Home) {
		t.Fatal("the persistent home has no image mounted")
	}
	var st syscall.Stat_t
	img := filepath.Join(member, homeImageName)
	if err := syscall.Lstat(img, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("the home image is uid %d mode %o; want root's, 0600", st.Uid, st.Mode&0o777)
	}
	if err := syscall.Lstat(spec.Home, &st); err != nil || int(st.Uid) != spec.User.UID || st.Mode&0o777 != 0o700 {
		t.Errorf("the mounted home is uid %d mode %o (%v); want the member's uid %d, 0700", st.Uid, st.Mode&0o777, err, spec.User.UID)
	}
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("cat ~/notes.txt; dd if=/dev/zero of=~/fill bs=1M count=64 2>&1 | grep -c 'No space left'; du -m ~/fill; rm ~/fill; echo DONE-$((40+2))\r"))
	out := readUntil(t, term, "DONE-42")
	term.Close()
	if !strings.Contains(out, "kept-41") {
		t.Errorf("the home before bounds did not move into the image: %q", out)
	}
	if !strings.Contains(out, "1\r\n1") { // refused, and du says 1x MiB
		t.Errorf("filling the home said %q; want it refused at the 16 MiB bound", out)
	}
	d.Stop()

	// The host restarts: the mount is gone, the image is not.
	if err := unmountDisk(spec.Home); err != nil {
		t.Fatal(err)
	}
	d2 := MustStartDesktop(t, spec)
	term, err = d2.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("cat ~/notes.txt; echo DONE-$((40+2))\r"))
	if out := readUntil(t, term, "DONE-42"); !strings.Contains(out, "kept-41") {
		t.Errorf("after a host restart the home says %q; want its notes back", out)
	}
}

// TestSandboxedDesktop_PersistentHomeNoLoop: a host without loop devices
// (forced by naming a missing loop-control) starts persistent desktops
// all the same, their homes on the data disk, and says so in doctor's
// words and the log.
func TestSandboxedDesktop_PersistentHomeNoLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxed desktops need root")
	}
	s, err := NewSandbox(SandboxConfig{UIDs: "202500-202599", Limits: Limits{NProc: 300, Home: 16 << 20}, Registry: t.TempDir(), LoopControl: "/nonexistent/loop-control"})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.HomeMissing(); !strings.Contains(m, "no loop devices") {
		t.Errorf("HomeMissing() = %q; want it to say the host has no loop devices", m)
	}
	spec := MustSandboxedSpec(t, s, "noloop")
	var logs bytes.Buffer
	if err := CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	d, err := StartDesktop(context.Background(), spec, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if isMountpoint(spec.Home) {
		t.Error("the home is a mount, on a host said to have no loop devices")
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(spec.Dir), homeImageName)); err == nil {
		t.Error("a home image was made, on a host said to have no loop devices")
	}
	if !strings.Contains(logs.String(), "the home has no disk bound") {
		t.Errorf("the log says %q; want a line saying the home has no disk bound", logs.String())
	}
}

// TestHomeMissing names the missing part of each host.
func TestHomeMissing(t *testing.T) {
	if _, err := findHomeDisks(false, ""); err == nil || !strings.Contains(err.Error(), "not root") {
		t.Errorf("findHomeDisks(not root) = %v; want it to say the portal is not root", err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "loop-control")
	os.WriteFile(plain, nil, 0o600)
	if _, err := findHomeDisks(true, plain); err == nil || !strings.Contains(err.Error(), "no loop devices") {
		t.Errorf("findHomeDisks(a plain file for loop-control) = %v; want no loop devices", err)
	}
	t.Setenv("PATH", dir)
	if _, err := findHomeDisks(true, "/dev/null"); err == nil || !strings.Contains(err.Error(), "mkfs.ext4 not found") {
		t.Errorf("findHomeDisks(no mkfs.ext4 on PATH) = %v; want it to name mkfs.ext4 and its package", err)
	}
	s := &Sandbox{limits: Limits{}}
	if m := s.HomeMissing(); !strings.Contains(m, "home=off") {
		t.Errorf("HomeMissing() with home=off = %q; want it to name home=off", m)
	}
}
