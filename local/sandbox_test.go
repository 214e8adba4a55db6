package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MustSandbox returns a sandbox over uids, with its own registry, for a
// test running as root; it skips the test otherwise.
func MustSandbox(tb testing.TB, uids string, limits Limits) *Sandbox {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("sandboxed desktops need root")
	}
	s, err := NewSandbox(SandboxConfig{UIDs: uids, Limits: limits, Registry: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.UnfenceHost() }) // a backend's New installs it
	return s
}

// MustSandboxedSpec returns the spec of a sandboxed member in a fresh short
// folder that desktop uids can pass through.
func MustSandboxedSpec(tb testing.TB, s *Sandbox, name string) DesktopSpec {
	tb.Helper()
	root, err := os.MkdirTemp("", "cs")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(root, name)
	u, err := s.user(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return DesktopSpec{Name: name, Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home"), State: filepath.Join(dir, "state"), User: u}
}

// mustPreparedUser returns the user of the member folder dir, with the
// folders its namespaces bind made.
func mustPreparedUser(tb testing.TB, s *Sandbox, dir string) *DesktopUser {
	tb.Helper()
	u, err := s.user(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(u.removeCgroup)
	for _, d := range []string{u.ns.run, u.ns.home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
		u.give(d)
	}
	if err := u.freshTmp(); err != nil {
		tb.Fatal(err)
	}
	return u
}

func TestNewSandbox_Refusals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/bash\nbob:x:200500:200500::/home/bob:/bin/sh\n"), 0o644)
	subuid := filepath.Join(t.TempDir(), "subuid")
	os.WriteFile(subuid, []byte("alice:100000:65536\ncarol:165536:65536\n"), 0o644)
	for _, tc := range []struct{ uids, want string }{
		{"200000-200999", "includes the user bob (id 200500) of " + passwd},
		{"230000-239999", "overlaps the subordinate ids 165536-231071 of carol in " + subuid},
		{"0-100", "starts below 1000"},
		{"300000", "is not a range"},
		{"300010-300000", "ends before it starts"},
		{"60000-70000", "includes nobody"},
	} {
		_, err := NewSandbox(SandboxConfig{UIDs: tc.uids, Passwd: passwd, SubUID: subuid, Registry: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("NewSandbox(%q) = %v; want one line containing %q", tc.uids, err, tc.want)
		}
	}
}

// TestNewSandbox_DefaultRangeMissesDebianIDs: the default range collides
// with nothing Debian's adduser hands out, on a host of many users who
// each got subordinate ids for rootless containers.
func TestNewSandbox_DefaultRangeMissesDebianIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var passwd, subids strings.Builder
	passwd.WriteString("root:x:0:0::/root:/bin/bash\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n")
	for i := range 200 {
		fmt.Fprintf(&passwd, "user%d:x:%d:%d::/home/user%d:/bin/bash\n", i, 1000+i, 1000+i, i)
		fmt.Fprintf(&subids, "user%d:%d:65536\n", i, 100000+i*65536)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"passwd": passwd.String(), "group": passwd.String(), "subuid": subids.String(), "subgid": subids.String()} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	_, err := NewSandbox(SandboxConfig{Passwd: filepath.Join(dir, "passwd"), Group: filepath.Join(dir, "group"),
		SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid"), Registry: t.TempDir()})
	if err != nil {
		t.Errorf("the default range %s on a Debian host of 200 users: %v", DefaultDesktopUIDs, err)
	}
}

func TestSandbox_UIDsAreRecordedAndUnique(t *testing.T) {
	s := MustSandbox(t, "201000-201001", Limits{})
	root := t.TempDir()
	a, err := s.user(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.user(filepath.Join(root, "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.removeCgroup)
	t.Cleanup(b.removeCgroup)
	if a.UID == b.UID {
		t.Fatalf("two members share uid %d", a.UID)
	}
	again, err := s.user(filepath.Join(root, "a"))
	if err != nil || again.UID != a.UID {
		t.Errorf("a again: uid %v, %v; want %d (re-adopted from its record)", again, err, a.UID)
	}
	if _, err := s.user(filepath.Join(root, "c")); err == nil || !strings.Contains(err.Error(), "every uid") {
		t.Errorf("third member of a 2-uid range: %v; want every uid taken", err)
	}
	// A deleted member's uid is free again.
	os.RemoveAll(filepath.Join(root, "b"))
	c, err := s.user(filepath.Join(root, "c"))
	if err != nil || c.UID != b.UID {
		t.Fatalf("after b is gone: %v, %v; want uid %d", c, err, b.UID)
	}
	c.removeCgroup()
}

func procUID(t *testing.T, pid int) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}

func TestSandboxedDesktop_RunsAsItsUIDAndLeavesNothing(t *testing.T) {
	s := MustSandbox(t, "201100-201199", Limits{NProc: 300, NoFile: 512})
	spec := MustSandboxedSpec(t, s, "sb")
	d := MustStartDesktop(t, spec)
	uid := spec.User.UID
	for _, p := range d.procs {
		if got := procUID(t, p.PID); got != uid {
			t.Errorf("%s runs as uid %d; want %d", p.Name, got, uid)
		}
	}
	if w, h, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 || h != 800 {
		t.Errorf("VNC %dx%d; want 1280x800", w, h)
	}
	if d.RDPSocket() == "" {
		t.Error("no RDP server")
	}

	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("echo ID=$(id -u):$(id -g):$(id -G) WHO=$(whoami)@$(hostname) HOME=~; ulimit -u; ulimit -n; cat " + filepath.Join(spec.State, desktopPidsName) + " || echo NO-PIDS-$((40+2))\r"))
	out := readUntil(t, term, "NO-PIDS-42")
	want := "ID=" + strconv.Itoa(uid) + ":" + strconv.Itoa(uid) + ":" + strconv.Itoa(uid)
	for _, w := range []string{want, "WHO=sb@sb HOME=/home/sb", "300", "512"} {
		if !strings.Contains(out, w) {
			t.Errorf("terminal said %q; want %q in it", out, w)
		}
	}
	term.Write([]byte("setsid sleep 1000 & touch /tmp/sb-leftover-" + strconv.Itoa(uid) + "; echo STARTED-$((40+2))\r"))
	readUntil(t, term, "STARTED-42")
	time.Sleep(200 * time.Millisecond)
	if n := len(uidProcs(uid)); n < 5 {
		t.Errorf("%d processes of uid %d; want the desktop's and the leftover", n, uid)
	}

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := uidProcs(uid); len(left) > 0 {
		t.Errorf("after Stop, processes of uid %d remain: %v", uid, left)
	}
	if err := wipeTmpOf(uid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/tmp/sb-leftover-" + strconv.Itoa(uid)); err == nil {
		t.Error("the user's /tmp file survived the wipe")
	}
}

func TestKillUID_SparesOthers(t *testing.T) {
	s := MustSandbox(t, "201200-201299", Limits{})
	root, _ := os.MkdirTemp("", "ku")
	defer os.RemoveAll(root)
	os.Chmod(root, 0o711)
	a := mustPreparedUser(t, s, filepath.Join(root, "a"))
	b := mustPreparedUser(t, s, filepath.Join(root, "b"))
	start := func(u *DesktopUser) *desktopProc {
		p, err := startDesktopProc("sleep", t.TempDir(), "/bin/sleep", []string{"1000"}, nil, "/", nil, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopDesktopProcs([]*desktopProc{p}, time.Second) })
		return p
	}
	pa, pb := start(a), start(b)
	if err := killUID(a.UID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !pa.wait(5 * time.Second) {
		t.Error("uid a's process survived killUID(a)")
	}
	if !pb.alive() {
		t.Error("killUID(a) killed uid b's process")
	}

}

func TestSandboxedDesktop_SymlinkedSocketIsRefused(t *testing.T) {
	s := MustSandbox(t, "201600-201699", Limits{})
	alice := MustStartDesktop(t, MustSandboxedSpec(t, s, "alice"))
	bob := MustStartDesktop(t, MustSandboxedSpec(t, s, "bob"))
	if _, _, name := rfbHandshake(t, alice.VNCSocket()); name != "alice" {
		t.Fatalf("alice's VNC desktop is named %q", name)
	}
	c, err := alice.dialSocket(context.Background(), alice.VNCSocket())
	if err != nil {
		t.Fatalf("dial alice's own socket: %v", err)
	}
	c.Close()
	// What alice's uid can do in her run folder: point vnc.sock at bob's.
	os.Remove(alice.VNCSocket())
	if err := os.Symlink(bob.VNCSocket(), alice.VNCSocket()); err != nil {
		t.Fatal(err)
	}
	os.Lchown(alice.VNCSocket(), alice.spec.User.UID, alice.spec.User.GID)
	if c, err := alice.dialSocket(context.Background(), alice.VNCSocket()); err == nil {
		c.Close()
		t.Fatal("the portal followed alice's symlink to bob's VNC socket")
	} else {
		t.Logf("refused: %v", err)
	}
	// A socket of another uid, even in her folder, is refused too.
	os.Remove(alice.VNCSocket())
	if err := os.Link(bob.VNCSocket(), alice.VNCSocket()); err == nil {
		if c, err := alice.dialSocket(context.Background(), alice.VNCSocket()); err == nil {
			c.Close()
			t.Error("the portal dialled bob's socket inode from alice's folder")
		}
	}
}

func TestSandboxedDesktop_NoNetwork(t *testing.T) {
	s := MustSandbox(t, "201800-201899", Limits{})
	d := MustStartDesktop(t, MustSandboxedSpec(t, s, "nonet"))
	if d.RDPSocket() == "" {
		t.Error("no RDP server without a network")
	}
	if w, _, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 {
		t.Errorf("VNC width %d; want 1280", w)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	// The host's loopback (where the portal listens) is out of reach, and
	// X clients still reach the display.
	term.Write([]byte("(exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && echo REACH''ED || echo NO-NET-$((40+2)); xwininfo -root >/dev/null 2>&1 && echo X-$((40+2))\r"))
	// One read up to the line's last marker: the shell's two answers can
	// come in one read, and a second readUntil would wait for what the
	// first already took.
	last := "NO-NET-42"
	if _, err := exec.LookPath("xwininfo"); err == nil {
		last = "X-42"
	}
	out := readUntil(t, term, last)
	if strings.Contains(out, "REACHED\r") || !strings.Contains(out, "NO-NET-42") {
		t.Errorf("a desktop without network reached the host's loopback: %q", out)
	}
	for _, p := range d.procs {
		if !p.alive() {
			t.Errorf("%s died without a network", p.Name)
		}
	}
}
