package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// MustDesktopSpec returns a spec in a fresh short temporary folder (Unix
// socket paths must stay under 108 bytes, which t.TempDir may exceed).
func MustDesktopSpec(tb testing.TB, name string) DesktopSpec {
	tb.Helper()
	root, err := os.MkdirTemp("", "cd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	return DesktopSpec{Name: name, Dir: filepath.Join(root, "d"), Home: filepath.Join(root, "h")}
}

// MustStartDesktop starts a desktop and stops it when the test ends.
func MustStartDesktop(tb testing.TB, spec DesktopSpec) *Desktop {
	tb.Helper()
	if err := CheckDesktopDeps(); err != nil {
		tb.Skip(err)
	}
	begin := time.Now()
	d, err := StartDesktop(context.Background(), spec, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("desktop %s ready on :%d in %v", spec.Name, d.Display(), time.Since(begin))
	tb.Cleanup(func() { d.Stop() })
	return d
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// rfbHandshake does the RFB 3.8 handshake with security None and returns the
// framebuffer size and desktop name from ServerInit.
func rfbHandshake(t *testing.T, sock string) (w, h int, name string) {
	t.Helper()
	c, w, h, name := rfbOpen(t, sock, true)
	c.Close()
	return w, h, name
}

// rfbOpen does rfbHandshake's handshake, asking for a shared session or
// not, and returns the open connection with ServerInit's size and name.
func rfbOpen(t *testing.T, sock string, shared bool) (c net.Conn, w, h int, name string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	banner := make([]byte, 12)
	_, err = io.ReadFull(r, banner)
	must(err)
	if got, want := string(banner), "RFB 003.008\n"; got != want {
		t.Fatalf("banner = %q; want %q", got, want)
	}
	_, err = c.Write([]byte("RFB 003.008\n"))
	must(err)
	n, err := r.ReadByte()
	must(err)
	types := make([]byte, n)
	_, err = io.ReadFull(r, types)
	must(err)
	if !strings.ContainsRune(string(types), 1) {
		t.Fatalf("security types = %v; want None (1) offered", types)
	}
	_, err = c.Write([]byte{1})
	must(err)
	var result uint32
	must(binary.Read(r, binary.BigEndian, &result))
	if result != 0 {
		t.Fatalf("SecurityResult = %d; want 0", result)
	}
	init0 := byte(0)
	if shared {
		init0 = 1
	}
	_, err = c.Write([]byte{init0}) // ClientInit
	must(err)
	var init struct {
		W, H    uint16
		Format  [16]byte
		NameLen uint32
	}
	must(binary.Read(r, binary.BigEndian, &init))
	nb := make([]byte, init.NameLen)
	_, err = io.ReadFull(r, nb)
	must(err)
	c.SetDeadline(time.Time{})
	return c, int(init.W), int(init.H), string(nb)
}

// recordedPids reads the pids file of a running desktop.
func recordedPids(t *testing.T, dir string) desktopPids {
	t.Helper()
	rec, err := readDesktopPids(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestDesktop_StartStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "alice")
	d := MustStartDesktop(t, spec)

	t.Run("RFB", func(t *testing.T) {
		w, h, name := rfbHandshake(t, d.VNCSocket())
		if w != 1280 || h != 800 {
			t.Errorf("ServerInit size = %dx%d; want 1280x800", w, h)
		}
		if name != "alice" {
			t.Errorf("ServerInit name = %q; want %q", name, "alice")
		}
	})

	t.Run("Modes", func(t *testing.T) {
		for path, want := range map[string]os.FileMode{
			spec.Dir:       0o700,
			d.VNCSocket():  0o600,
			d.XAuthority(): 0o600,
		} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("mode of %s = %v; want %v", path, got, want)
			}
		}
		if fi, _ := os.Stat(d.VNCSocket()); fi.Mode().Type() != os.ModeSocket {
			t.Errorf("%s is not a socket", d.VNCSocket())
		}
	})

	rec := recordedPids(t, spec.Dir)
	t.Run("Pids", func(t *testing.T) {
		if rec.Display != d.Display() {
			t.Errorf("recorded display = %d; want %d", rec.Display, d.Display())
		}
		var names []string
		for _, p := range rec.Procs {
			names = append(names, p.Name)
			if !p.alive() {
				t.Errorf("%s (pid %d) not alive", p.Name, p.PID)
			}
			if pgid, _ := syscall.Getpgid(p.PID); pgid != p.PID {
				t.Errorf("%s pgid = %d; want its own group %d", p.Name, pgid, p.PID)
			}
		}
		want := "Xvnc,openbox"
		if _, err := lookRDP(); err == nil {
			want += "," + rdpShadow
		}
		if checkAudioElements() == nil {
			want += "," + audioServer
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("recorded procs = %s; want %s", got, want)
		}
	})

	t.Run("NoTCP", func(t *testing.T) {
		if ports := tcpListenersOf(t, rec.Procs[0].PID); len(ports) > 0 {
			t.Errorf("Xvnc listens on TCP ports %v; want none", ports)
		}
	})

	t.Run("Xauthority", func(t *testing.T) {
		env := []string{"DISPLAY=:" + strconv.Itoa(d.Display()), "PATH=" + os.Getenv("PATH")}
		good := exec.Command("xsetroot", "-solid", "#2f3e4e")
		good.Env = d.Env()
		if out, err := good.CombinedOutput(); err != nil {
			t.Errorf("xsetroot with the cookie: %v: %s", err, out)
		}
		bad := exec.Command("xsetroot", "-solid", "#2f3e4e")
		bad.Env = append(env, "XAUTHORITY="+filepath.Join(spec.Dir, "nonexistent"))
		if out, err := bad.CombinedOutput(); err == nil {
			t.Errorf("xsetroot without the cookie succeeded; want refused (%s)", out)
		}
	})

	t.Run("NoServerKeyRepeat", func(t *testing.T) {
		q := exec.Command("xset", "q")
		q.Env = d.Env()
		out, err := q.CombinedOutput()
		if err != nil {
			t.Fatalf("xset q: %v: %s", err, out)
		}
		if !regexp.MustCompile(`auto repeat:\s+off`).Match(out) {
			t.Errorf("xset q says %q; want auto repeat off (the console repeats a held key itself)", out)
		}
	})

	t.Run("Windows", func(t *testing.T) {
		// xwininfo and xprop come with x11-utils, not a dependency.
		xwininfo, err1 := exec.LookPath("xwininfo")
		xprop, err2 := exec.LookPath("xprop")
		if err1 != nil || err2 != nil {
			t.Skip("x11-utils not installed")
		}
		env := d.Env()
		x := func(bin string, args ...string) string {
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			out, _ := cmd.CombinedOutput()
			return string(out)
		}
		// The clients start after StartDesktop returns; under load xterm
		// takes a second or more to map its window.
		var win, wm string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			win = x(xwininfo, "-name", "alice")
			wm = x(xprop, "-root", "_NET_SUPPORTING_WM_CHECK")
			if strings.Contains(win, "IsViewable") && strings.Contains(wm, "window id") {
				break
			}
		}
		if !strings.Contains(win, "IsViewable") || !strings.Contains(wm, "window id") {
			t.Fatalf("no viewable xterm window titled alice or no window manager:\n%s\n%s", win, wm)
		}
		// The window manager started the terminal once it managed the
		// screen (the terminal is in its process group): a terminal
		// started beside it could map its window before the manager is
		// there, and be lost or wait Xt's 5 s for the manager.
		var openbox *desktopProc
		for _, p := range d.procs {
			if p.Name == "openbox" {
				openbox = p
			}
		}
		if openbox == nil {
			t.Fatalf("no openbox among the desktop's processes %v", d.procs)
		}
		group := processGroup(t, openbox.PID)
		if !slices.Contains(group, "xterm") {
			t.Errorf("the window manager's process group (%d) holds %q; want the terminal (xterm) in it", openbox.PID, group)
		}
	})

	// The session makes ~/Downloads (the Files panel's folder) before its
	// terminal starts: a command typed into a fresh desktop can save there.
	t.Run("Downloads", func(t *testing.T) {
		var err error
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			var fi os.FileInfo
			if fi, err = os.Stat(filepath.Join(spec.Home, downloadsDir)); err == nil && fi.IsDir() {
				return
			}
		}
		t.Errorf("no ~/Downloads in a fresh desktop's home: %v", err)
	})

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
	default:
		t.Error("Done not closed after Stop")
	}
	if err := d.Err(); err != nil {
		t.Errorf("Err after Stop = %v; want nil", err)
	}
	for _, p := range rec.Procs {
		if start, state, err := readProcStat(p.PID); err == nil && start == p.Start {
			t.Errorf("%s (pid %d) still in /proc after Stop (state %c)", p.Name, p.PID, state)
		}
	}
	for _, name := range []string{"vnc.sock", "pids"} {
		if _, err := os.Stat(filepath.Join(spec.Dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Stop: %v; want removed", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "Xvnc.log")); err != nil {
		t.Errorf("Xvnc.log after Stop: %v; want kept", err)
	}
}

// tcpListenersOf returns the local ports of listening TCP sockets pid holds.
func tcpListenersOf(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 && fs[3] == "0A" && inodes[fs[9]] { // 0A = LISTEN
				ports = append(ports, fs[1])
			}
		}
	}
	return ports
}

func TestDesktop_TwoDisplays(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a := MustStartDesktop(t, MustDesktopSpec(t, "a"))
	b := MustStartDesktop(t, MustDesktopSpec(t, "b"))
	if a.Display() == b.Display() {
		t.Errorf("both desktops on display :%d; want different", a.Display())
	}
	if a.VNCSocket() == b.VNCSocket() {
		t.Errorf("both desktops on socket %s", a.VNCSocket())
	}
	a.Stop()
	b.Stop()
}

func TestDesktop_Geometry(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "g")
	spec.Geometry = "1024x768"
	d := MustStartDesktop(t, spec)
	if w, h, _ := rfbHandshake(t, d.VNCSocket()); w != 1024 || h != 768 {
		t.Errorf("ServerInit size = %dx%d; want 1024x768", w, h)
	}
	d.Stop()
}

// eventuallyGone reports whether pid is gone (or a zombie) within d.
func eventuallyGone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, state, err := readProcStat(pid); err != nil || state == 'Z' || state == 'X' {
			return true
		}
	}
	return false
}

// processGroup returns the names (comm) of the processes in group pgid.
func processGroup(t *testing.T, pgid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// comm is between the first '(' and the last ')'; pgrp is the
		// third field after it.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		if f := strings.Fields(string(b[end+1:])); len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			names = append(names, string(b[open+1:end]))
		}
	}
	return names
}
