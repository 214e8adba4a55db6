package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testvm"
)

// mustVMImage returns the tiny VM image, skipping the test without QEMU;
// an image that cannot be built or found fails it (Image builds it on
// first use, so a failure there is the build's, which a skip would hide).
func mustVMImage(t *testing.T) VMImage {
	t.Helper()
	if _, err := lookQEMU(); err != nil {
		t.Skip(err)
	}
	dir, err := os.Getenv("CORRAL_VDI_VM_IMAGE"), error(nil)
	if dir == "" {
		dir, err = testvm.Image() // this checkout's, not the cache's current
	}
	img, err2 := FindVMImage(dir, "")
	if err = errors.Join(err, err2); err != nil {
		t.Fatal(err)
	}
	return img
}

// mustVMDir returns a short folder for a guest's sockets.
func mustVMDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cvm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestVM_BootAdoptStop boots the tiny image under QEMU (TCG here unless KVM
// works), sees its serial line speak, adopts it as a restarted portal
// would, and stops it through the adopted handle.
func TestVM_BootAdoptStop(t *testing.T) {
	img := mustVMImage(t)
	dir := mustVMDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)

	start := time.Now()
	v, err := bootVM(ctx, vmBoot{name: "vm-test", dir: dir, img: img, accel: mustAccelerator(t, "", "", dir), log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if len(v.Password()) < 16 {
		t.Errorf("Password() = %q; want a random password", v.Password())
	}
	if err := v.speaksWithin(ctx, 90*time.Second); err != nil {
		t.Fatalf("guest said nothing on its serial line: %v", err)
	}
	t.Logf("serial line spoke %v after start", time.Since(start).Round(100*time.Millisecond))

	// The display's second head has a VNC server of its own, and the
	// guest drives it: asked for 1024x768 there, its virtio-gpu driver
	// sets that mode (the image's modules; without them the head keeps
	// QEMU's 640x480 placeholder).
	if n := v.Heads(); n != vmHeads {
		t.Fatalf("Heads() = %d; want %d", n, vmHeads)
	}
	head, err := v.dial(ctx, v.HeadAddr(2))
	if err != nil {
		t.Fatalf("dial head 2: %v", err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	sizes, err := askHeadSize(hctx, head, 1024, 768)
	hcancel()
	head.Close()
	if err != nil {
		t.Fatalf("head 2 asked for 1024x768: sizes %v, then %v; want the guest to set 1024x768", sizes, err)
	}
	t.Logf("head 2: %v", sizes)
	if v.HeadAddr(3) != "" {
		t.Errorf("HeadAddr(3) = %q; want none", v.HeadAddr(3))
	}

	a, err := adoptVM(vmBoot{name: "vm-test", dir: dir, log: log})
	if err != nil {
		t.Fatalf("adoptVM of a running guest: %v", err)
	}
	if a.SerialAddr() != v.SerialAddr() || a.VNCAddr() != v.VNCAddr() || a.HeadAddr(2) != v.HeadAddr(2) {
		t.Errorf("adopted addresses %s %s %s; want %s %s %s", a.SerialAddr(), a.VNCAddr(), a.HeadAddr(2), v.SerialAddr(), v.VNCAddr(), v.HeadAddr(2))
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.Done(): // the original handle sees QEMU go too
	case <-time.After(10 * time.Second):
		t.Fatal("QEMU still running after Stop")
	}
	for _, name := range []string{vmRecordName, vmPasswordName, vmInitrdName} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Stop: %v; want it removed", name, err)
		}
	}
	if _, err := adoptVM(vmBoot{name: "vm-test", dir: dir, log: log}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("adoptVM after Stop = %v; want ErrNotRunning", err)
	}
}

// serialLogin logs in on the guest's serial line as user with password
// and runs a command, returning an error that says where it got stuck.
func serialLogin(ctx context.Context, addr, user, password string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, vmNetwork(addr), addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReader(c)
	var seen strings.Builder
	until := func(want string) error {
		for !strings.Contains(seen.String(), want) {
			if strings.Contains(seen.String(), "Login incorrect") {
				seen.Reset()
				return errors.New("Login incorrect")
			}
			b, err := r.ReadByte()
			if err != nil {
				return fmt.Errorf("waiting for %q: %v; the line said:\n%s", want, err, seen.String())
			}
			seen.WriteByte(b)
		}
		seen.Reset()
		return nil
	}
	// login turns echo off and flushes what was typed once it shows its
	// prompt; on a slow TCG guest a password sent at once can land before
	// that and be thrown away, as for a person who types ahead. So wait a
	// moment after each prompt, and try again after a "Login incorrect".
	var last error
	for range 3 {
		steps := []struct{ send, want string }{
			{"\r", "login: "},
			{user + "\r", "Password: "},
			{password + "\r", "# "},
			{"echo vm-$((6*7))\r", "vm-42"},
		}
		last = nil
		for _, s := range steps {
			if _, err := c.Write([]byte(s.send)); err != nil {
				return err
			}
			if err := until(s.want); err != nil {
				last = err
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if last == nil || ctx.Err() != nil {
			return last
		}
	}
	return last
}

// TestVM_ConsolesAnswerOnceStarted: as bootVM returns, each head's VNC
// server answers at once (its RFB greeting), with no retry: QEMU makes
// the serial line's socket before its VNC servers listen, and a console
// opened right after the VM was said to run was refused.
func TestVM_ConsolesAnswerOnceStarted(t *testing.T) {
	img := mustVMImage(t)
	dir := mustVMDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := bootVM(ctx, vmBoot{name: "vm-up", dir: dir, img: img, accel: mustAccelerator(t, AccelTCG, "", dir), log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	for n := 1; n <= v.Heads(); n++ {
		c, err := v.dial(ctx, v.HeadAddr(n))
		if err != nil {
			t.Errorf("head %d's VNC server as the VM started: %v; want it listening", n, err)
			continue
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		greeting := make([]byte, 12)
		if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "RFB 003.008\n" {
			t.Errorf("head %d's VNC server as the VM started: %q, %v; want its RFB greeting", n, greeting, err)
		}
		c.Close()
	}
}

// TestVMInitrd_Appends checks the archive the kernel appends: aligned, and
// holding the hash where the image's init reads it.
func TestVMInitrd_Appends(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gz")
	os.WriteFile(base, []byte("12345"), 0o600) // 5 bytes: the archive must start at 8
	path, err := writeVMInitrd(dir, VMImage{Initrd: base}, "$6$salt$hash", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b[:8]) != "12345\x00\x00\x00" || string(b[8:14]) != "070701" {
		t.Fatalf("initrd starts %q; want the base, zeros to offset 8, then a newc archive", b[:14])
	}
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-i", "--to-stdout", vmHashPath)
		cmd.Stdin = strings.NewReader(string(b[8:]))
		out, err := cmd.Output()
		if err != nil || string(out) != "$6$salt$hash\n" {
			t.Errorf("cpio -i %s = %q, %v; want the hash", vmHashPath, out, err)
		}
	}
}

// TestVM_RunsAsTheMembersUID boots a sandboxed member's guest: QEMU runs
// as the member's uid, its record and password stay in the portal's state
// folder, the guest still logs in with Password, and Stop leaves no
// process of the uid.
func TestVM_RunsAsTheMembersUID(t *testing.T) {
	img := mustVMImage(t)
	s := MustSandbox(t, "200100-200109", Limits{})
	spec := MustSandboxedSpec(t, s, "vm-sb")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := vmBoot{name: "vm-sb", dir: spec.Dir, state: spec.State, user: spec.User, img: img,
		accel: mustAccelerator(t, AccelTCG, "", t.TempDir()), log: slog.New(slog.DiscardHandler)}
	v, err := bootVM(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if uid := procUID(t, v.rec.Proc.PID); uid != spec.User.UID {
		t.Errorf("QEMU runs as uid %d; want the member's %d", uid, spec.User.UID)
	}
	for _, name := range []string{vmRecordName, vmPasswordName} {
		if _, err := os.Stat(filepath.Join(spec.State, name)); err != nil {
			t.Errorf("%s not in the state folder: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(spec.Dir, name)); err == nil {
			t.Errorf("%s in the member's run folder, which its user owns", name)
		}
	}
	if err := serialLogin(ctx, v.SerialAddr(), VMUser, v.Password()); err != nil {
		t.Fatalf("serial login: %v", err)
	}
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	if procs := uidProcs(spec.User.UID); len(procs) != 0 {
		t.Errorf("processes of uid %d after Stop: %v", spec.User.UID, procs)
	}
}

// TestVM_Namespaced boots a guest as a portal that is not root does: QEMU
// in namespaces of its own, outside the portal's pid namespace; the
// serial login works and Stop leaves nothing.
func TestVM_Namespaced(t *testing.T) {
	img := mustVMImage(t)
	s := mustUsernsSandbox(t, Limits{})
	spec := MustSandboxedSpec(t, s, "vm-ns")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := vmBoot{name: "vm-ns", dir: spec.Dir, state: spec.State, user: spec.User, img: img,
		accel: mustAccelerator(t, AccelTCG, "", t.TempDir()), log: slog.New(slog.DiscardHandler)}
	v, err := bootVM(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if err := serialLogin(ctx, v.SerialAddr(), VMUser, v.Password()); err != nil {
		t.Fatalf("serial login: %v", err)
	}
	qemu := procsRunning("corral-vm-ns")
	self, _ := os.Readlink("/proc/self/ns/pid")
	inside := 0
	for _, pid := range qemu {
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns != self {
			inside++
		}
	}
	if inside == 0 {
		t.Errorf("no QEMU of the guest in a pid namespace of its own (processes %v)", qemu)
	}
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := procsRunning("corral-vm-ns"); len(left) != 0 {
		t.Errorf("processes of the guest after Stop: %v", left)
	}
}

// TestVM_NoPasswordOnCommandLine checks that neither the guest's password
// nor its hash is on QEMU's command line, which every process can read.
func TestVM_NoPasswordOnCommandLine(t *testing.T) {
	img := mustVMImage(t)
	dir := mustVMDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := bootVM(ctx, vmBoot{name: "vm-cl", dir: dir, img: img, accel: mustAccelerator(t, AccelTCG, "", dir), log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", v.rec.Proc.PID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), v.Password()) || strings.Contains(string(cmdline), "$6$") {
		t.Errorf("QEMU's command line holds the password or its hash: %q", cmdline)
	}
	fi, err := os.Stat(filepath.Join(dir, vmInitrdName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("initramfs with the hash has mode %v; want no access for group or others", fi.Mode().Perm())
	}
}
