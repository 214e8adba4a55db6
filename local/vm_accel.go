package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Accelerators QEMU guests run under.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// vmAccelName is the file of the host's verdict.
const vmAccelName = "vm-accel.json"

// accelFile is where the verdict is kept: with the VM image in the user's
// cache folder, since it is a fact of the host that every portal on it
// shares, or in dir when there is no cache folder.
func accelFile(dir string) string {
	if base, err := os.UserCacheDir(); err == nil {
		if err := os.MkdirAll(filepath.Join(base, "corral-vdi"), 0o700); err == nil {
			return filepath.Join(base, "corral-vdi", vmAccelName)
		}
	}
	return filepath.Join(dir, vmAccelName)
}

// accelerator decides once per host whether QEMU guests run under KVM or
// TCG. Some hosts open /dev/kvm but never run a guest: QEMU then hangs
// without a word, and only a boot that stays silent shows it. That costs a
// full vmKVMBootWait, so the verdict is remembered, in memory and in the
// cache folder, keyed by the kernel, QEMU's version and the device, and later
// boots go straight to the accelerator that works.
type accelerator struct {
	force     string        // AccelKVM or AccelTCG: no probing, no fallback
	kvmDevice string        // opening it for writing means KVM may be tried
	file      string        // where the verdict is kept; "" keeps it in memory only
	qemu      string        // the QEMU binary, whose version is part of the key
	wait      time.Duration // how long a KVM guest may stay silent
	log       *slog.Logger

	mu      sync.Mutex
	verdict string // "" until decided
	key     string // the host key the verdict belongs to
	logged  bool
}

// accelRecord is the remembered verdict.
type accelRecord struct {
	Key     string    `json:"key"`
	Accel   string    `json:"accel"`
	Reason  string    `json:"reason"`
	Decided time.Time `json:"decided"`
}

// newAccelerator returns an accelerator for QEMU binary qemu. force is
// CORRAL_VDI_VM_ACCEL ("", "auto", "kvm" or "tcg"); kvmDevice defaults to
// /dev/kvm; file is where the verdict is remembered.
func newAccelerator(force, kvmDevice, file, qemu string, log *slog.Logger) (*accelerator, error) {
	switch force {
	case "", "auto":
		force = ""
	case AccelKVM, AccelTCG:
	default:
		return nil, fmt.Errorf("CORRAL_VDI_VM_ACCEL: %q is not auto, kvm or tcg", force)
	}
	if kvmDevice == "" {
		kvmDevice = "/dev/kvm"
	}
	if log == nil {
		log = slog.Default()
	}
	return &accelerator{force: force, kvmDevice: kvmDevice, file: file, qemu: qemu, wait: vmKVMBootWait, log: log}, nil
}

// choose returns the accelerator for the next boot, and whether that boot
// must prove the choice by speaking within a.wait.
func (a *accelerator) choose() (accel string, probe bool) {
	if a.force != "" {
		a.logOnce(a.force, "forced by CORRAL_VDI_VM_ACCEL")
		return a.force, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verdict == "" {
		a.load()
	}
	if a.verdict == AccelTCG {
		return AccelTCG, false
	}
	f, err := os.OpenFile(a.kvmDevice, os.O_RDWR, 0)
	if err != nil {
		a.settleLocked(AccelTCG, fmt.Sprintf("%s cannot be opened (%v)", a.kvmDevice, err), false)
		return AccelTCG, false
	}
	f.Close()
	return AccelKVM, true
}

// settle records the verdict a boot proved: KVM when its guest spoke, TCG
// when it stayed silent.
func (a *accelerator) settle(accel, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settleLocked(accel, reason, true)
}

func (a *accelerator) settleLocked(accel, reason string, keep bool) {
	changed := a.verdict != accel
	a.verdict = accel
	if changed || !a.logged {
		a.logged = true
		a.log.Info("vm accelerator decided for this host", "accel", accel, "reason", reason,
			"override", "set CORRAL_VDI_VM_ACCEL=kvm or tcg to force one")
	}
	if !keep || !changed || a.file == "" {
		return
	}
	b, _ := json.Marshal(accelRecord{Key: a.hostKey(), Accel: accel, Reason: reason, Decided: time.Now().UTC()})
	tmp := a.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, a.file)
		if err != nil {
			a.log.Warn("could not remember the vm accelerator", "file", a.file, "err", err)
		}
	} else {
		a.log.Warn("could not remember the vm accelerator", "file", a.file, "err", err)
	}
}

// load reads a remembered verdict for this host, if any.
func (a *accelerator) load() {
	if a.file == "" {
		return
	}
	b, err := os.ReadFile(a.file)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var rec accelRecord
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		a.log.Warn("ignoring the remembered vm accelerator", "file", a.file, "err", err)
		return
	}
	if rec.Key != a.hostKey() || (rec.Accel != AccelKVM && rec.Accel != AccelTCG) {
		return // another kernel, QEMU or device: decide afresh
	}
	a.verdict = rec.Accel
	a.logged = true
	a.log.Info("vm accelerator remembered for this host", "accel", rec.Accel, "reason", rec.Reason,
		"decided", rec.Decided, "file", a.file, "override", "set CORRAL_VDI_VM_ACCEL=kvm or tcg to force one")
}

// logOnce logs a forced choice the first time it is made.
func (a *accelerator) logOnce(accel, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.logged {
		a.logged = true
		a.log.Info("vm accelerator", "accel", accel, "reason", reason)
	}
}

// hostKey names what the verdict depends on: the kernel, QEMU and the
// device. Computed once; called with mu held.
func (a *accelerator) hostKey() string {
	if a.key != "" {
		return a.key
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var version []byte
	if out, err := exec.Command(a.qemu, "--version").Output(); err == nil {
		version, _, _ = bytes.Cut(out, []byte("\n"))
	}
	a.key = strings.Join([]string{strings.TrimSpace(string(kernel)), strings.TrimSpace(string(version)), a.kvmDevice}, "|")
	return a.key
}

// args returns QEMU's options for accel. KVM keeps TCG as QEMU's own
// fallback for hosts where KVM fails to initialise (which, unlike a hang,
// QEMU notices).
func accelArgs(accel string) []string {
	if accel == AccelKVM {
		return []string{"-accel", "kvm", "-accel", "tcg"}
	}
	return []string{"-accel", "tcg"}
}
