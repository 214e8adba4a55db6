package local

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mustUsernsSandbox returns a sandbox that runs desktops in user
// namespaces, as a portal that is not root does. Tests here run as root,
// which production refuses (see usernsAsRoot).
func mustUsernsSandbox(tb testing.TB, limits Limits) *Sandbox {
	tb.Helper()
	if err := CheckDesktopDeps(); err != nil {
		tb.Skip(err)
	}
	usernsAsRoot = true
	tb.Cleanup(func() { usernsAsRoot = false })
	s, err := NewSandbox(SandboxConfig{Mode: SandboxUserns, Limits: limits})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// procsRunning returns the PIDs of live processes whose command line has
// marker.
func procsRunning(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			if _, state, err := readProcStat(pid); err == nil && state != 'Z' {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestNamespacedDesktop_SeesOnlyItsOwn starts a desktop as a portal that is
// not root would: its consoles work, and from its terminal the portal's
// state, the portal's process and the host's loopback are out of reach;
// Stop leaves nothing of what its user started.
func TestNamespacedDesktop_SeesOnlyItsOwn(t *testing.T) {
	s := mustUsernsSandbox(t, Limits{NProc: 300, NoFile: 512})
	if !s.Namespaced() || s.Owns(os.Getuid()) {
		t.Fatalf("sandbox %s: want namespaced, owning no uid", s.Describe())
	}
	spec := MustSandboxedSpec(t, s, "ns1")
	os.MkdirAll(spec.State, 0o700)
	os.WriteFile(filepath.Join(spec.State, "secret"), []byte("portal-secret"), 0o600)
	d := MustStartDesktop(t, spec)
	if w, h, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 || h != 800 {
		t.Errorf("VNC %dx%d; want 1280x800", w, h)
	}
	if d.RDPSocket() == "" {
		t.Error("no RDP server")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	checks := strings.Join([]string{
		"echo HOST=$(hostname)",
		"ulimit -u; ulimit -n",
		"cat " + filepath.Join(spec.State, "secret") + " 2>/dev/null || echo STATE-HIDDEN",
		"kill -0 " + strconv.Itoa(os.Getpid()) + " 2>/dev/null || echo PORTAL-UNSEEN",
		"(exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null || echo LOOPBACK-APART",
		"ls /root 2>/dev/null || echo HOMES-HIDDEN",
		"echo hi > ~/mine && echo HOME-WRITABLE",
		"ls " + filepath.Dir(spec.Dir) + " 2>/dev/null || echo MEMBER-PATH-UNSEEN",
		"DISPLAY=:" + strconv.Itoa(d.Display()) + " xsetroot -solid gray && echo DISPLAY-WORKS",
		"setsid sleep 4242424 & echo STARTED-$((40+2))",
	}, "; ")
	term.Write([]byte(checks + "\r"))
	out := readUntil(t, term, "STARTED-42")
	t.Logf("terminal: %q", out)
	for _, want := range []string{"HOST=ns1", "300", "512", "STATE-HIDDEN", "PORTAL-UNSEEN", "LOOPBACK-APART", "HOMES-HIDDEN", "HOME-WRITABLE", "MEMBER-PATH-UNSEEN", "DISPLAY-WORKS"} {
		if !strings.Contains(out, want+"\r\n") && !strings.Contains(out, want+"\n") {
			t.Errorf("terminal said %q; want %q", out, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(spec.Home, "mine")); err != nil || string(b) != "hi\n" {
		t.Errorf("the file written in the desktop's home: %q, %v", b, err)
	}
	if strings.Contains(out, "portal-secret") {
		t.Error("the desktop read the portal's state")
	}
	time.Sleep(200 * time.Millisecond)
	if len(procsRunning("sleep 4242424")) != 1 {
		t.Fatalf("the user's setsid leftover is not running: %v", procsRunning("sleep 4242424"))
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(procsRunning("sleep 4242424")) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := procsRunning("sleep 4242424"); len(left) > 0 {
		t.Errorf("after Stop, the user's leftover still runs: %v", left)
	}
	if left := procsRunning(spec.Dir); len(left) > 0 {
		t.Errorf("after Stop, processes of the desktop remain: %v", left)
	}
}

// TestNewSandbox_UsernsRefusals forces each way bubblewrap can be missing
// or fail on a host, and a root portal asking for namespaces.
func TestNewSandbox_UsernsRefusals(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		_, err := NewSandbox(SandboxConfig{Mode: SandboxUserns})
		if err == nil || !strings.Contains(err.Error(), "runs as root") {
			t.Errorf("err = %v; want the refusal of namespaces as root", err)
		}
	})
	usernsAsRoot = true
	defer func() { usernsAsRoot = false }()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip(err)
	}
	wait := usernsProbeWait
	usernsProbeWait = time.Second
	defer func() { usernsProbeWait = wait }()
	fake := func(t *testing.T, script string) {
		dir, _ := os.MkdirTemp("", "fake-bwrap") // a desktop uid runs it too
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		os.Symlink(prlimit, filepath.Join(dir, "prlimit"))
		if script != "" {
			os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\n"+script+"\n"), 0o755)
		}
		t.Setenv("PATH", dir)
	}
	for _, tc := range []struct{ name, script, want string }{
		{"no-bwrap", "", "install the Debian package bubblewrap"},
		{"no-userns", "echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2; exit 1", "No permissions to creating new namespace"},
		{"hangs", "exec sleep 60", "no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake(t, tc.script)
			_, err := NewSandbox(SandboxConfig{Mode: SandboxUserns})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("err = %v; want one line with %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "run the portal as root") {
				t.Errorf("err = %v; want it to say what to change", err)
			}
			// A root portal's desktops make their namespaces as their uids.
			_, err = NewSandbox(SandboxConfig{UIDs: "202000-202099", Registry: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 || !strings.Contains(err.Error(), "CORRAL_VDI_DESKTOP_UIDS") {
				t.Errorf("as root: err = %v; want one line with %q saying what to change", err, tc.want)
			}
		})
	}
}

// TestNewUserns_ProbeKilledByOthers: a probe that a signal the portal did
// not send ended (a stray kill, the OOM killer) is asked once more, so a
// busy machine does not turn local desktops off; killed again, the error
// says so.
func TestNewUserns_ProbeKilledByOthers(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip(err)
	}
	marks := t.TempDir()
	fake := func(t *testing.T, script string) {
		dir := t.TempDir()
		os.Symlink(prlimit, filepath.Join(dir, "prlimit"))
		os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\n"+script+"\n"), 0o755)
		t.Setenv("PATH", dir)
	}
	t.Run("once", func(t *testing.T) {
		mark := filepath.Join(marks, "killed")
		// The shell that runs bubblewrap is killed, as in a CI run
		// where one portal of many found "(signal: killed)".
		fake(t, "[ -e "+mark+" ] && exit 0; : > "+mark+"; kill -9 $PPID; sleep 5")
		if _, err := newUserns(nil, prlimit, -1); err != nil {
			t.Errorf("a probe killed once by another: %v; want it asked again, and namespaces on", err)
		}
		if _, err := os.Stat(mark); err != nil {
			t.Errorf("the first probe did not run: %v", err)
		}
	})
	t.Run("again", func(t *testing.T) {
		fake(t, "kill -9 $$") // bubblewrap itself, each time: its shell says so
		_, err := newUserns(nil, prlimit, -1)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "killed") {
			t.Errorf("a probe killed twice: %v; want the refusal saying it was killed", err)
		}
	})
}
