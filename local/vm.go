package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// QEMU members: a vm pool's member is a QEMU guest booting the tiny image
// that scripts/vm-image.sh builds (a Debian kernel and a busybox initramfs
// with a root login on the serial line and on the VGA console). Its VNC
// server and serial line listen on Unix sockets in the member's folder (see
// vmEndpoints), recorded there with QEMU's PID, so a restarted portal adopts
// the guest like it adopts a session desktop. The guest has no disk and no network:
// a restart is a fresh machine, and ephemeral and persistent pools behave
// alike.

const (
	vmRecordName   = "vm.json"
	vmVNCSocket    = "vnc.sock"
	vmSerialSocket = "serial.sock"
	vmLogName      = "qemu"
	vmPasswordName = "vm.password"
	vmMemory       = "128" // MiB; 64 does not boot the Debian kernel
	vmReadyWait    = 10 * time.Second
	vmStopGrace    = 3 * time.Second
	vmKVMBootWait  = 15 * time.Second
	// VMUser is the login of every local VM.
	VMUser = "root"
)

// VMImage is a kernel and initramfs to boot.
type VMImage struct {
	Kernel string
	Initrd string
}

// FindVMImage returns the image in dir (vmlinuz, initramfs.gz), or in the
// cache folder scripts/vm-image.sh fills (cache, or its default in the
// user's cache folder) when dir is empty. The error says how to build one.
func FindVMImage(dir, cache string) (VMImage, error) {
	if dir == "" {
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return VMImage{}, fmt.Errorf("local: no VM image folder: %w", err)
			}
			cache = filepath.Join(base, "corral-vdi", "vm-image")
		}
		dir = filepath.Join(cache, "current")
	}
	img := VMImage{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initramfs.gz")}
	for _, f := range []string{img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return VMImage{}, fmt.Errorf("local: VM image missing (%v): run scripts/vm-image.sh, or set CORRAL_VDI_VM_IMAGE to a folder with vmlinuz and initramfs.gz", err)
		}
	}
	return img, nil
}

// lookQEMU returns the path of qemu-system-x86_64, or an error naming the
// Debian package to install.
func lookQEMU() (string, error) {
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return "", errors.New("qemu-system-x86_64 not found: install the Debian package qemu-system-x86")
	}
	return p, nil
}

// vmRecord is <Dir>/vm.json: what adoption needs to find a running guest.
type vmRecord struct {
	Proc   *desktopProc `json:"proc"`
	VNC    string       `json:"vnc"`    // the VNC server of the display's first head
	Serial string       `json:"serial"` // the serial line
	// Heads are the VNC servers of the display's further heads, in order
	// (vm_endpoints.go); a guest booted before they existed has none.
	Heads []string `json:"heads,omitempty"`
	// Monitor is QEMU's QMP socket, where it has one (vm_start.go).
	Monitor string `json:"monitor,omitempty"`
}

// VM is a running QEMU guest.
type VM struct {
	dir  string
	name string
	log  *slog.Logger
	rec  vmRecord
	done chan struct{}
	// state holds the record, password and log (the portal's); dir the
	// sockets and initramfs (the guest's user's); user runs QEMU.
	state string
	user  *DesktopUser

	mu       sync.Mutex
	stopping bool
	err      error
	stopOnce sync.Once
	stopErr  error
	poll     chan struct{}
}

// vmBoot says what bootVM boots, and where.
type vmBoot struct {
	name string
	// dir is the guest's run folder: its sockets and initramfs, handed to
	// user when there is one.
	dir string
	// state is the portal's folder for the guest: its record (pid), root
	// password and log, out of the user's reach; "" means dir.
	state string
	// user is who QEMU runs as (the member's uid); nil runs it as the
	// portal's own user (tests of this package only).
	user  *DesktopUser
	img   VMImage
	accel *accelerator
	// listenTCP puts VNC and serial on loopback ports (vmEndpoints).
	listenTCP bool
	// heads is how many heads the guest's display has; 0 is vmHeads.
	heads int
	// monitor gives QEMU a QMP socket (vm_start.go).
	monitor bool
	log     *slog.Logger
}

// stateDir is where the portal keeps the guest's record and password.
func (c vmBoot) stateDir() string {
	if c.state == "" {
		return c.dir
	}
	return c.state
}

// bootVM boots the member's guest and returns once QEMU listens (the guest
// then boots on its own; its serial console shows that). Each boot gets a
// fresh random root password, which Password returns from then on: a
// fallback from a silent KVM guest to TCG keeps it, so the sign-in shown to
// the holder is always the one the running guest accepts.
func bootVM(ctx context.Context, cfg vmBoot) (*VM, error) {
	qemu, err := lookQEMU()
	if err != nil {
		return nil, err
	}
	killRecordedVM(cfg)
	if err := prepareVMDirs(cfg); err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", cfg.name, err)
	}
	password, hash, err := vmPassword(ctx)
	if err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", cfg.name, err)
	}
	initrd, err := writeVMInitrd(cfg.dir, cfg.img, hash, cfg.user)
	if err != nil {
		return nil, fmt.Errorf("local: vm %s: initramfs: %w", cfg.name, err)
	}
	accel, probe := cfg.accel.choose()
	v, err := launchVM(ctx, cfg, qemu, initrd, accel)
	if err == nil && probe {
		// Some hosts open /dev/kvm but cannot run guests: QEMU then hangs
		// without a word. A KVM guest speaks on its serial line within seconds.
		serr := v.speaksWithin(ctx, cfg.accel.wait)
		if serr != nil && ctx.Err() != nil { // gave up on the start, not a verdict
			v.Stop()
			return nil, fmt.Errorf("local: vm %s: %w", cfg.name, ctx.Err())
		}
		if serr != nil {
			v.log.Warn("vm silent under KVM; restarting it with TCG", "waited", cfg.accel.wait, "err", serr)
			cfg.accel.settle(AccelTCG, fmt.Sprintf("a KVM guest stayed silent for %v", cfg.accel.wait))
			v.Stop() // which removes the initramfs with the hash: write it again
			if initrd, err = writeVMInitrd(cfg.dir, cfg.img, hash, cfg.user); err == nil {
				v, err = launchVM(ctx, cfg, qemu, initrd, AccelTCG)
			}
		} else {
			cfg.accel.settle(AccelKVM, "a KVM guest spoke on its serial line")
		}
	}
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.stateDir(), vmPasswordName), []byte(password), 0o600); err != nil {
		v.Stop()
		return nil, fmt.Errorf("local: vm %s: %w", cfg.name, err)
	}
	return v, nil
}

// launchVM starts QEMU under accel and waits until it listens.
func launchVM(ctx context.Context, cfg vmBoot, qemu, initrd, accel string) (*VM, error) {
	name, dir := cfg.name, cfg.dir
	// A stop removes the cgroup: the last boot's, or the silent KVM
	// guest's just before this TCG one.
	if err := cfg.user.cgroup().make(); err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", name, err)
	}
	heads := cfg.heads
	if heads == 0 {
		heads = vmHeads
	}
	rec, vncArgs, serialArg, err := vmEndpoints(dir, cfg.listenTCP, heads)
	if err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", name, err)
	}
	args := append(accelArgs(accel),
		"-name", "corral-"+name, "-m", vmMemory, "-nodefaults", "-no-user-config",
		"-nic", "none", "-display", "none", "-serial", serialArg,
	)
	args = append(args, vmDisplayArgs(vncArgs)...) // vm_endpoints.go
	args = append(args,
		"-kernel", "/dev/fd/3", "-initrd", initrd, // the kernel is the portal's: QEMU gets it open
		// no_timer_check: under TCG on a busy host the kernel's IO-APIC
		// timer check can miss its ticks and panic ("IO-APIC + timer
		// doesn't work!"), as a loaded CI run saw; cloud images pass it too.
		"-append", "console=tty0 console=ttyS0,115200 quiet loglevel=3 rdinit=/init no_timer_check",
	)
	args = append(args, usbArgs(dir)...) // vm_usb.go
	if cfg.monitor {
		rec.Monitor = filepath.Join(dir, vmMonitorSocket)
		args = append(args, monitorArgs(rec.Monitor)...) // vm_start.go
	}
	kernel, err := os.Open(cfg.img.Kernel)
	if err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", name, err)
	}
	defer kernel.Close()
	p, err := startDesktopProc(vmLogName, cfg.stateDir(), qemu, args, []string{"PATH=" + desktopPath()}, dir, []*os.File{kernel}, qemuUser(cfg.user, vmNetwork(rec.VNC) == "tcp"))
	if err != nil {
		return nil, fmt.Errorf("local: vm %s: %w", name, err)
	}
	rec.Proc = p
	v := &VM{dir: dir, state: cfg.stateDir(), user: cfg.user, name: name, log: cfg.log.With("vm", name), done: make(chan struct{}), rec: rec}
	go func() {
		<-p.exited
		v.ended(p.waitErr)
	}()
	if err := v.waitReady(ctx); err != nil {
		v.Stop()
		return nil, err
	}
	if err := v.writeRecord(); err != nil {
		v.Stop()
		return nil, fmt.Errorf("local: vm %s: %w", name, err)
	}
	v.log.Info("vm started", "pid", p.PID, "accel", accel, "vnc", v.rec.VNC, "serial", v.rec.Serial)
	return v, nil
}

// speaksWithin reports, as a nil error, whether the guest writes anything
// on its serial line within d.
func (v *VM) speaksWithin(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := v.dial(ctx, v.rec.Serial)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	c.Write([]byte("\r")) // a getty that is already up answers with a prompt
	_, err = c.Read(make([]byte, 1))
	return err
}

// adoptVM takes over the guest a previous portal recorded in cfg's state
// folder; the error wraps ErrNotRunning when there is none.
func adoptVM(cfg vmBoot) (*VM, error) {
	name, state := cfg.name, cfg.stateDir()
	b, err := os.ReadFile(filepath.Join(state, vmRecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local: vm %s: %w", name, ErrNotRunning)
	} else if err != nil {
		return nil, err
	}
	var rec vmRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Proc == nil {
		return nil, fmt.Errorf("local: vm %s: bad %s: %v", name, vmRecordName, err)
	}
	if !rec.Proc.alive() {
		os.Remove(filepath.Join(state, vmRecordName))
		return nil, fmt.Errorf("local: vm %s: %w", name, ErrNotRunning)
	}
	v := &VM{dir: cfg.dir, state: state, user: cfg.user, name: name, log: cfg.log.With("vm", name), rec: rec,
		done: make(chan struct{}), poll: make(chan struct{})}
	go v.pollExit()
	return v, nil
}

// pollExit watches an adopted guest, which is not our child to wait on.
func (v *VM) pollExit() {
	t := time.NewTicker(desktopPollEvery)
	defer t.Stop()
	for {
		select {
		case <-v.poll:
			return
		case <-t.C:
			if !v.rec.Proc.alive() {
				v.ended(errors.New("exited"))
				return
			}
		}
	}
}

// ended records that QEMU exited and closes Done.
func (v *VM) ended(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.done:
		return
	default:
	}
	if !v.stopping {
		msg := "qemu exited"
		if err != nil {
			msg += ": " + err.Error()
		}
		if line := lastLogLine(filepath.Join(v.state, vmLogName+".log")); line != "" {
			msg += ": " + line
		}
		v.err = errors.New(msg)
	}
	close(v.done)
}

// waitReady waits until QEMU's serial line and each head's VNC server
// accept connections: QEMU makes the serial socket before its VNC servers
// listen, and a console opened as the VM was said to run (the page opens
// one right after the claim) was refused ("did not answer").
func (v *VM) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, vmReadyWait)
	defer cancel()
	for _, addr := range append([]string{v.rec.Serial, v.rec.VNC}, v.rec.Heads...) {
		for {
			c, err := v.dial(ctx, addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-v.done:
				return fmt.Errorf("local: vm %s: %w", v.name, v.Err())
			case <-ctx.Done():
				return fmt.Errorf("local: vm %s: QEMU did not listen on %s within %v: %s", v.name, addr, vmReadyWait, lastLogLine(filepath.Join(v.state, vmLogName+".log")))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func (v *VM) writeRecord() error {
	b, err := json.Marshal(v.rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(v.state, vmRecordName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(v.state, vmRecordName))
}

// VNCAddr returns the address of the VNC server of the guest's first
// head: a Unix socket's path, or host:port.
func (v *VM) VNCAddr() string { return v.rec.VNC }

// SerialAddr returns the address of the guest's serial line, like VNCAddr.
func (v *VM) SerialAddr() string { return v.rec.Serial }

// Password returns the guest's root password.
func (v *VM) Password() string {
	b, _ := os.ReadFile(filepath.Join(v.state, vmPasswordName))
	return strings.TrimSpace(string(b))
}

// Done returns a channel closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Err returns why the guest ended on its own; nil while it runs or when
// Stop ended it.
func (v *VM) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// Stop ends QEMU and removes its record; the log stays.
func (v *VM) Stop() error {
	v.stopOnce.Do(func() {
		v.mu.Lock()
		v.stopping = true
		v.mu.Unlock()
		if v.poll != nil {
			close(v.poll)
		}
		err := stopDesktopProcs([]*desktopProc{v.rec.Proc}, vmStopGrace)
		err = errors.Join(err, v.user.killLeftovers(vmStopGrace)) // and whatever else its user runs
		v.user.removeCgroup()
		v.ended(nil)
		for _, p := range []string{filepath.Join(v.state, vmRecordName), filepath.Join(v.state, vmPasswordName),
			filepath.Join(v.dir, vmInitrdName), filepath.Join(v.dir, vmVNCSocket), filepath.Join(v.dir, vmSerialSocket)} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		if err != nil {
			v.stopErr = fmt.Errorf("local: stop vm %q: %w", v.name, err)
		}
		v.log.Info("vm stopped", "err", v.stopErr)
	})
	return v.stopErr
}

// killRecordedVM stops a guest recorded for cfg that no one adopted, and
// anything else its user left running.
func killRecordedVM(cfg vmBoot) {
	if v, err := adoptVM(cfg); err == nil {
		v.Stop()
	}
	if err := cfg.user.killLeftovers(vmStopGrace); err != nil {
		cfg.log.Warn("processes of a vm's uid left running", "vm", cfg.name, "uid", cfg.user.UID, "err", err)
	}
}
