package local

// The desktop when a part of it fails: its X server killed, its terminal
// exited, a start that fails, a bad spec, missing programs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestDesktop_XvncKilled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := MustStartDesktop(t, MustDesktopSpec(t, "erin"))
	if err := syscall.Kill(d.procs[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Xvnc was killed")
	}
	err := d.Err()
	if err == nil || !strings.Contains(err.Error(), "Xvnc exited") {
		t.Errorf("Err = %v; want it to say Xvnc exited", err)
	}
	if err := d.Stop(); err != nil {
		t.Errorf("Stop after Xvnc died: %v", err)
	}
	if d.Err() == nil {
		t.Error("Err after Stop of a dead desktop = nil; want the original cause kept")
	}
}

func TestDesktop_XtermExitKeepsDesktop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := MustStartDesktop(t, MustDesktopSpec(t, "fay"))
	// openbox starts the terminal: find it among openbox's children.
	var xterm int
	for end := time.Now().Add(5 * time.Second); xterm == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		buf, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", d.procs[1].PID, d.procs[1].PID))
		fmt.Sscan(string(buf), &xterm)
	}
	if xterm == 0 {
		t.Fatal("openbox started no terminal")
	}
	if err := syscall.Kill(xterm, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !eventuallyGone(xterm, 5*time.Second) {
		t.Fatal("xterm did not exit")
	}
	time.Sleep(100 * time.Millisecond)
	select {
	case <-d.Done():
		t.Fatalf("desktop ended when xterm exited: %v", d.Err())
	default:
	}
	if w, _, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 {
		t.Errorf("width = %d; want 1280", w)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestDesktop_StartFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	if err := CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	spec := MustDesktopSpec(t, "gus")
	spec.Geometry = "99999x99999" // valid syntax, refused by Xvnc
	_, err := StartDesktop(context.Background(), spec, testLogger(t))
	if err == nil {
		t.Fatal("StartDesktop with a huge geometry succeeded; want an error")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), filepath.Join(spec.Dir, "Xvnc.log")) {
		t.Errorf("error %q does not name the log file", err)
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "pids")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pids after failed start: %v; want removed", err)
	}
}

func TestDesktop_SpecErrors(t *testing.T) {
	long := "/tmp/" + strings.Repeat("x", 100)
	for _, tt := range []struct {
		name string
		spec DesktopSpec
		want string
	}{
		{"NoDir", DesktopSpec{Home: "/tmp/h"}, "Dir is required"},
		{"NoHome", DesktopSpec{Dir: "/tmp/d"}, "Home is required"},
		{"BadGeometry", DesktopSpec{Dir: "/tmp/d", Home: "/tmp/h", Geometry: "big"}, "bad geometry"},
		{"LongDir", DesktopSpec{Dir: long, Home: "/tmp/h"}, "too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := StartDesktop(context.Background(), tt.spec, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("StartDesktop(%+v) = %v; want error containing %q", tt.spec, err, tt.want)
			}
		})
	}
}

func TestDesktop_CheckDeps(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckDesktopDeps()
	if err == nil {
		t.Fatal("CheckDesktopDeps with an empty PATH = nil; want an error")
	}
	for _, want := range []string{
		"Xvnc not found: install the Debian package tigervnc-standalone-server",
		"xsetroot not found: install the Debian package x11-xserver-utils",
		"openbox not found: install the Debian package openbox",
		"xterm not found: install the Debian package xterm",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckDesktopDeps() = %q; want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("CheckDesktopDeps() = %q; want one line", err)
	}
}
