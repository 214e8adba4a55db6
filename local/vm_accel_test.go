package local

// The VM accelerator's choice (KVM, or TCG where KVM opens but hangs)
// under a stand-in QEMU that plays a host's KVM.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mustAccelerator returns an accelerator remembering its verdict in dir.
func mustAccelerator(t *testing.T, force, kvmDevice, dir string) *accelerator {
	t.Helper()
	qemu, _ := lookQEMU()
	a, err := newAccelerator(force, kvmDevice, filepath.Join(dir, vmAccelName), qemu, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fakeKVM puts first on PATH a qemu-system-x86_64 that runs the real one
// and stands in for KVM whatever the host has: with hangs, a guest asked to
// run under KVM starts paused (-S) and never speaks, as on hosts whose
// /dev/kvm opens but cannot run guests; without, it runs under TCG alone,
// as a KVM guest that works. Every call's arguments are appended to the
// returned log file.
func fakeKVM(t *testing.T, hangs bool) (argsLog string) {
	t.Helper()
	real, err := lookQEMU()
	if err != nil {
		t.Skip(err)
	}
	bin := t.TempDir()
	argsLog = filepath.Join(bin, "args.log")
	kvm := `exec %[2]s -S "$@"`
	if !hangs {
		kvm = `shift 4; exec %[2]s -accel tcg "$@"` // drops "-accel kvm -accel tcg"
	}
	script := fmt.Sprintf(`#!/bin/sh
echo "$*" >>%[1]s
case " $* " in *" -accel kvm "*) `+kvm+`;; esac
exec %[2]s "$@"
`, strconv.Quote(argsLog), strconv.Quote(real))
	if err := os.WriteFile(filepath.Join(bin, "qemu-system-x86_64"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return argsLog
}

// launches returns the accelerators of the QEMU launches in argsLog (the
// --version calls left out).
func launches(t *testing.T, argsLog string) []string {
	t.Helper()
	b, err := os.ReadFile(argsLog)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "-accel kvm") {
			out = append(out, AccelKVM)
		} else if strings.Contains(line, "-accel tcg") {
			out = append(out, AccelTCG)
		}
	}
	return out
}

// TestVM_KVMFallbackKeepsSignIn forces the path that hosts whose /dev/kvm
// opens but cannot run guests take: the KVM guest stays silent, the boot
// falls back to TCG, and the holder logs in with the password Password
// returns. The verdict is remembered: the next boot, and a restarted
// portal's, go straight to TCG without waiting on KVM again.
func TestVM_KVMFallbackKeepsSignIn(t *testing.T) {
	img := mustVMImage(t)
	argsLog := fakeKVM(t, true)
	dir := mustVMDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	accel := mustAccelerator(t, "", os.DevNull, dir) // /dev/null opens: KVM "may be tried"
	accel.wait = 3 * time.Second

	v, err := bootVM(ctx, vmBoot{name: "vm-fb", dir: dir, img: img, accel: accel, log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if got, want := strings.Join(launches(t, argsLog), ","), "kvm,tcg"; got != want {
		t.Errorf("launches = %s; want %s (a silent KVM guest, then TCG)", got, want)
	}
	if len(v.Password()) < 16 {
		t.Fatalf("Password() after the fallback = %q; want the running guest's random password", v.Password())
	}
	if err := serialLogin(ctx, v.SerialAddr(), VMUser, v.Password()); err != nil {
		t.Fatalf("serial login with Password() after the fallback: %v", err)
	}
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}

	// The verdict is kept in memory and in the data dir.
	for _, a := range []*accelerator{accel, mustAccelerator(t, "", os.DevNull, dir)} {
		if got, probe := a.choose(); got != AccelTCG || probe {
			t.Errorf("choose() after a silent KVM guest = %s, probe %v; want tcg without a probe", got, probe)
		}
	}
	os.Remove(argsLog)
	v2, err := bootVM(ctx, vmBoot{name: "vm-fb", dir: dir, img: img, accel: mustAccelerator(t, "", os.DevNull, dir), log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Stop()
	if got := strings.Join(launches(t, argsLog), ","); got != AccelTCG {
		t.Errorf("launches of a restarted portal's boot = %s; want tcg alone", got)
	}
}

// TestVM_KVMThatWorks forces the path of hosts where KVM runs guests: the
// guest speaks, KVM is the verdict, and later boots still use KVM (each
// proving it again, which costs nothing when KVM works).
func TestVM_KVMThatWorks(t *testing.T) {
	img := mustVMImage(t)
	argsLog := fakeKVM(t, false)
	dir := mustVMDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	accel := mustAccelerator(t, "", os.DevNull, dir)
	accel.wait = 90 * time.Second // the stand-in "KVM" guest is a TCG one
	for range 2 {
		v, err := bootVM(ctx, vmBoot{name: "vm-kvm", dir: dir, img: img, accel: accel, log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Password()) < 16 {
			t.Errorf("Password() = %q; want a random password", v.Password())
		}
		v.Stop()
	}
	if got, want := strings.Join(launches(t, argsLog), ","), "kvm,kvm"; got != want {
		t.Errorf("launches = %s; want %s", got, want)
	}
	if got, probe := mustAccelerator(t, "", os.DevNull, dir).choose(); got != AccelKVM || !probe {
		t.Errorf("choose() after a KVM guest spoke = %s, probe %v; want kvm, proved again", got, probe)
	}
}

// TestAccelerator_Choose covers the verdicts that do not need a guest.
func TestAccelerator_Choose(t *testing.T) {
	dir := t.TempDir()
	t.Run("Forced", func(t *testing.T) {
		for _, force := range []string{AccelKVM, AccelTCG} {
			if got, probe := mustAccelerator(t, force, os.DevNull, dir).choose(); got != force || probe {
				t.Errorf("choose() forced %s = %s, probe %v; want %s without a probe", force, got, probe, force)
			}
		}
	})
	t.Run("BadForce", func(t *testing.T) {
		if _, err := newAccelerator("hvf", "", "", "", nil); err == nil || !strings.Contains(err.Error(), "CORRAL_VDI_VM_ACCEL") {
			t.Errorf("newAccelerator(hvf) = %v; want an error naming CORRAL_VDI_VM_ACCEL", err)
		}
	})
	t.Run("NoDevice", func(t *testing.T) {
		if got, probe := mustAccelerator(t, "", filepath.Join(dir, "no-kvm"), dir).choose(); got != AccelTCG || probe {
			t.Errorf("choose() without the device = %s, probe %v; want tcg without a probe", got, probe)
		}
	})
	t.Run("DeviceOpens", func(t *testing.T) {
		if got, probe := mustAccelerator(t, "", os.DevNull, t.TempDir()).choose(); got != AccelKVM || !probe {
			t.Errorf("choose() with an openable device = %s, probe %v; want kvm with a probe", got, probe)
		}
	})
	t.Run("OtherHostForgets", func(t *testing.T) {
		d := t.TempDir()
		a := mustAccelerator(t, "", os.DevNull, d)
		a.settle(AccelTCG, "test")
		b := mustAccelerator(t, "", os.DevNull, d)
		b.key = "another kernel|another qemu|/dev/null"
		if got, _ := b.choose(); got != AccelKVM {
			t.Errorf("choose() with a verdict for another host = %s; want kvm (decide afresh)", got)
		}
	})
	t.Run("BadFile", func(t *testing.T) {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, vmAccelName), []byte("{not json"), 0o600)
		if got, _ := mustAccelerator(t, "", os.DevNull, d).choose(); got != AccelKVM {
			t.Errorf("choose() with a broken record = %s; want kvm (decide afresh)", got)
		}
	})
}
