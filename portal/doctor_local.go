package portal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/corral-dev/corral-vdi-portal/local"
)

// localPackage is a Debian package the local backend (or a feature of it)
// needs, and the program that shows it is there.
type localPackage struct {
	name, program, why string
	// optional packages warn when missing instead of failing.
	optional bool
}

// localPackages are what scripts/deps.sh installs, plus usbredirect for
// USB on the user's machine.
var localPackages = []localPackage{
	{name: "tigervnc-standalone-server", program: "Xvnc", why: "display and VNC of session desktops"},
	{name: "tigervnc-tools", program: "vncpasswd", why: "VNC passwords"},
	{name: "openbox", program: "openbox", why: "the window manager of session desktops"},
	{name: "xterm", program: "xterm", why: "the terminal window on session desktops"},
	{name: "freerdp2-shadow-x11", program: "freerdp-shadow-cli", why: "RDP of session desktops"},
	{name: "winpr-utils", program: "winpr-hash", why: "per-desktop NLA credentials"},
	{name: "qemu-system-x86", program: "qemu-system-x86_64", why: "vm pools", optional: true},
	{name: "busybox-static", program: "busybox", why: "the tiny VM image", optional: true},
	{name: "usbredirect", program: "usbredirect", why: "`usb redir` on a user's machine", optional: true},
}

// versionArgs are how each program tells its version.
var versionArgs = map[string][]string{
	"Xvnc":               {"-version"},
	"freerdp-shadow-cli": {"/version"},
	"qemu-system-x86_64": {"--version"},
}

// checkLocal checks what the local backend needs on this machine.
func checkLocal(ctx context.Context, fs *findings, cfg Config, getenv func(string) string) {
	for _, p := range localPackages {
		version := dpkgVersion(ctx, p.name)
		path, lookErr := exec.LookPath(p.program)
		fix := "apt-get install " + p.name + " (or `sudo scripts/deps.sh`)"
		switch {
		case lookErr != nil && p.optional:
			fs.warn("package", fix, "%s is missing (%s): without it no %s", p.name, p.program, p.why)
		case lookErr != nil:
			fs.fail("package", fix, "%s is missing (%s not on PATH): %s need it", p.name, p.program, p.why)
		default:
			v := version
			if args, ok := versionArgs[p.program]; ok {
				if out := programVersion(ctx, path, args); out != "" {
					v = out
				}
			}
			if v == "" {
				v = "not from a Debian package"
			}
			fs.ok("package", "%s: %s (%s)", p.name, v, path)
		}
	}
	checkKVM(fs, cfg)
	checkSandbox(fs, cfg)
	checkH264(ctx, fs, cfg)
}

// dpkgVersion returns the installed version of a Debian package, or "".
func dpkgVersion(ctx context.Context, name string) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}|${Version}", name).Output()
	if err != nil {
		return ""
	}
	status, version, _ := strings.Cut(string(out), "|")
	if !strings.Contains(status, "install ok installed") {
		return ""
	}
	return version
}

// programVersion runs path with args and returns the first line that
// names a version.
func programVersion(ctx context.Context, path string, args []string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, args...).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "FreeRDP version"); i >= 0 {
			line = line[i:] // after freerdp's log prefix
		}
		if strings.Contains(strings.ToLower(line), "version") || strings.HasPrefix(line, "Xvnc TigerVNC") {
			if len(line) > 100 {
				line = line[:100]
			}
			return line
		}
	}
	return ""
}

// kvmGetAPIVersion is the KVM_GET_API_VERSION ioctl, _IO(0xAE, 0x00).
const kvmGetAPIVersion = 0xAE00

// checkKVM reports whether QEMU guests can use KVM here.
func checkKVM(fs *findings, cfg Config) {
	dev := cfg.Local.KVMDevice
	if dev == "" {
		dev = "/dev/kvm"
	}
	if cfg.Local.VMAccel == "tcg" {
		fs.ok("kvm", "CORRAL_VDI_VM_ACCEL=tcg: guests run under TCG (slow, but they run)")
		return
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		fix := "Enable virtualisation in the firmware (or nested virtualisation on a VM) and load kvm_intel or kvm_amd; guests run under TCG meanwhile."
		if errors.Is(err, os.ErrPermission) {
			fix = "Run the portal as root or in the kvm group."
		}
		fs.warn("kvm", fix, "%s cannot be opened (%v): QEMU guests run under TCG, several times slower", dev, err)
		return
	}
	defer f.Close()
	v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, uintptr(unsafe.Pointer(nil)))
	if errno != 0 || v != 12 {
		fs.warn("kvm", "Check the kernel's kvm module (dmesg); guests run under TCG meanwhile.", "%s opens but KVM_GET_API_VERSION says %d (%v); want 12", dev, v, errno)
		return
	}
	fs.ok("kvm", "%s is usable (KVM API 12); the portal still tries one guest before trusting it and falls back to TCG if it hangs", dev)
}

// checkSandbox checks what keeps desktops away from the portal: a
// sandbox this host allows (uids of their own as root, else user
// namespaces) and a private data directory.
func checkSandbox(fs *findings, cfg Config) {
	s, err := local.NewSandbox(local.SandboxConfig{Mode: cfg.Local.DesktopSandbox, UIDs: cfg.Local.DesktopUIDs, Limits: cfg.Local.DesktopLimits})
	if err != nil {
		fs.fail("sandbox", "Do what the line says; until then serve refuses to start local desktops (pools, claims and history stay).", "%v", err)
	} else {
		fs.ok("sandbox", "desktops are kept apart by %s", s.Describe())
		switch missing := s.NetworkMissing(); {
		case cfg.Local.DesktopNetwork == local.NetworkNone:
			fs.ok("desktop-network", "desktops have only a loopback of their own (CORRAL_VDI_DESKTOP_NETWORK=none)")
		case missing != "":
			fs.warn("desktop-network", "Do what the line says; desktops of outbound pools get only a loopback meanwhile.", "%s", missing)
		default:
			fs.ok("desktop-network", "desktops of outbound pools reach the network through pasta, as their own uid; the host's loopback is out of their reach")
		}
		if cfg.Local.DesktopNetwork != local.NetworkNone && s.NetworkMissing() == "" {
			checkHostFence(fs, s, filepath.Join(cfg.Server.DataDir, localDirName))
		}
		if missing := s.MissingLimits(); missing != "" {
			fs.warn("desktop-limits", "Give the portal a cgroup tree of its own (see docs/security.md); desktops run meanwhile.", "%s", missing)
		} else {
			fs.ok("desktop-limits", "each desktop's processes share one cgroup (%s): %s", s.KernelLimits(), cfg.Local.DesktopLimits)
		}
		if missing := s.HomeMissing(); missing != "" {
			fs.warn("desktop-home", "Run the portal as root on a host with loop devices and e2fsprogs, or accept that a persistent desktop can fill the data disk.", "%s", missing)
		} else {
			fs.ok("desktop-home", "each persistent member's home is a sparse ext4 image of its own (home= in CORRAL_VDI_DESKTOP_LIMITS), loop-mounted")
		}
	}
	fi, err := os.Stat(cfg.Server.DataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fs.ok("data-dir", "%s does not exist yet; serve makes it (0700)", cfg.Server.DataDir)
	case err != nil:
		fs.fail("data-dir", "Check the path and its parents' permissions, or set CORRAL_VDI_DATA_DIR.", "%s: %v", cfg.Server.DataDir, err)
	case !fi.IsDir():
		fs.fail("data-dir", "Set CORRAL_VDI_DATA_DIR to a directory.", "%s is not a directory", cfg.Server.DataDir)
	case fi.Mode().Perm()&0o066 != 0:
		fs.fail("data-dir", fmt.Sprintf("chmod 700 %s", cfg.Server.DataDir), "%s is %v: others may read the portal's keys and database", cfg.Server.DataDir, fi.Mode().Perm())
	default:
		// 0711 is what serve itself sets for sandboxed desktops (their uids
		// pass through to their own folders); what keeps the portal's files
		// private then is their own 0600.
		if open := readableFiles(cfg.Server.DataDir); len(open) > 0 {
			fs.fail("data-dir", "chmod 600 "+strings.Join(open, " "), "%s: others may read %s", cfg.Server.DataDir, strings.Join(open, ", "))
			return
		}
		fs.ok("data-dir", "%s is private (%v, every file in it 0600)", cfg.Server.DataDir, fi.Mode().Perm())
	}
}

// checkHostFence reports whether desktops' networks are fenced off the
// host's addresses: a root portal's nftables table in place (serve
// installs it). A portal that is not root gives desktops no outbound
// network at all (desktop-network says why).
func checkHostFence(fs *findings, s *local.Sandbox, dir string) {
	f := s.Fence(dir)
	if f == nil { // not root: desktops have no outbound network (desktop-network says why)
		return
	}
	if err := f.Check(); err != nil {
		fs.warn("host-fence", "serve installs it when it starts; if serve runs, see its log for why it could not (desktops of outbound pools then get no network).", "the nftables fence that keeps desktops off the host's addresses is not in place: %v", err)
		return
	}
	fs.ok("host-fence", "nftables table inet %s refuses what desktops' network stacks send to any address of the host (every family, link-local, broadcast, anycast, multicast)", f.Table())
}

// readableFiles returns the regular files directly in dir that others
// than the owner may read or write.
func readableFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var open []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Type().IsRegular() && info.Mode().Perm()&0o077 != 0 {
			open = append(open, filepath.Join(dir, e.Name()))
		}
	}
	return open
}
