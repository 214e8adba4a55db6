package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestDesktop_Adopt(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "bob")

	t.Run("ErrNotRunning", func(t *testing.T) {
		_, err := AdoptDesktop(spec, testLogger(t))
		if !errors.Is(err, ErrNotRunning) {
			t.Fatalf("AdoptDesktop on an empty folder = %v; want ErrNotRunning", err)
		}
	})

	// A portal restart: the first Desktop is dropped without Stop.
	first := MustStartDesktop(t, spec)
	rec := recordedPids(t, spec.Dir)

	d, err := AdoptDesktop(spec, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Display() != first.Display() {
		t.Errorf("adopted display = %d; want %d", d.Display(), first.Display())
	}
	if w, h, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 || h != 800 {
		t.Errorf("adopted ServerInit size = %dx%d; want 1280x800", w, h)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range rec.Procs {
		if p.alive() {
			t.Errorf("%s (pid %d) alive after Stop of the adopted desktop", p.Name, p.PID)
		}
	}
	select {
	case <-first.Done(): // the dropped object still reaps its children
	case <-time.After(5 * time.Second):
		t.Error("first desktop not done after the adopted one stopped")
	}
	if _, err := AdoptDesktop(spec, testLogger(t)); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("AdoptDesktop after Stop = %v; want ErrNotRunning", err)
	}
}

func TestDesktop_AdoptDone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "carol")
	first := MustStartDesktop(t, spec)
	d, err := AdoptDesktop(spec, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if err := syscall.Kill(first.procs[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("adopted desktop: Done not closed after Xvnc was killed")
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "Xvnc") {
		t.Errorf("Err = %v; want it to mention Xvnc", err)
	}
	d.Stop()
	first.Stop()
}

func TestDesktop_AdoptKillsLeftovers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "dave")
	first := MustStartDesktop(t, spec)
	rec := recordedPids(t, spec.Dir)
	// Xvnc gone but its clients recorded: nothing to adopt, clean up the rest.
	if err := syscall.Kill(rec.Procs[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	_, err := AdoptDesktop(spec, testLogger(t))
	if !errors.Is(err, ErrNotRunning) {
		t.Fatalf("AdoptDesktop = %v; want ErrNotRunning", err)
	}
	for _, p := range rec.Procs {
		if p.alive() {
			t.Errorf("%s (pid %d) alive after AdoptDesktop gave up", p.Name, p.PID)
		}
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "pids")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pids after AdoptDesktop gave up: %v; want removed", err)
	}
	first.Stop()
}

func TestDesktop_RestartKillsLeftovers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	spec := MustDesktopSpec(t, "hal")
	first := MustStartDesktop(t, spec)
	rec := recordedPids(t, spec.Dir)
	second := MustStartDesktop(t, spec)
	for _, p := range rec.Procs {
		if p.alive() {
			t.Errorf("old %s (pid %d) alive after a new start in the same folder", p.Name, p.PID)
		}
	}
	<-first.Done()
	if w, _, _ := rfbHandshake(t, second.VNCSocket()); w != 1280 {
		t.Errorf("width = %d; want 1280", w)
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
}
