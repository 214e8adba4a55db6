package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/corral-dev/corral-vdi-portal/internal/procgroup"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Every desktop process runs in namespaces of its own, made by
// bubblewrap: started as the member's own uid by a root portal, as the
// portal's uid otherwise. A user namespace (no privilege over anything
// outside), a pid namespace (the portal and every other process out of
// sight and out of reach of signals; when the process ends, all it left
// behind is killed with it), UTS and IPC namespaces (the member's host
// name), a network namespace (its own loopback only, or the desktop's
// shared one: sandbox_net.go; the portal's port and the host's abstract
// sockets out of reach), and a mount namespace that holds the system
// read-only (/usr, /etc, with the member's account files over passwd and
// group) and, of the portal's files, only the member's own run, home and
// tmp folders. The portal's data dir, its secrets and the home of the
// portal's user are simply not there.

// SandboxUIDs, SandboxUserns and SandboxAuto are the values of
// CORRAL_VDI_DESKTOP_SANDBOX.
const (
	SandboxAuto   = "auto"   // uids when root, else user namespaces
	SandboxUIDs   = "uids"   // a uid of its own per member (root only)
	SandboxUserns = "userns" // user namespaces made by bubblewrap
)

// usernsRootDirs are the folders of the host a namespaced desktop sees,
// read-only: enough to run its programs, nothing of the portal's.
var usernsRootDirs = []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// usernsAsRoot lets a root portal run namespaced desktops: for tests of
// this package only, which run as root.
var usernsAsRoot = false

// usernsProbeWait bounds the check that bubblewrap works here (a var:
// tests shorten it).
var usernsProbeWait = 10 * time.Second

// userns is how a portal that is not root sandboxes desktops.
type userns struct {
	bwrap string   // the path of bwrap
	hide  []string // the portal's files under usernsRootDirs to mask (its secret files)
}

// newUserns finds bubblewrap and checks it can make the namespaces here:
// as uid, a desktop uid of a root portal, or as the portal itself when
// uid is negative. The error is one line saying what to change.
func newUserns(hide []string, prlimit string, uid int) (*userns, error) {
	who, fix := "the portal is not root, so each desktop runs in user namespaces made by bubblewrap", "or run the portal as root"
	if uid >= 0 {
		who, fix = "each desktop runs as its uid in namespaces made by bubblewrap", "or set CORRAL_VDI_DESKTOP_UIDS to a range allowed them"
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("local desktops are off: %s, and bwrap is not installed: install the Debian package bubblewrap, %s", who, fix)
	}
	ns := &userns{bwrap: bwrap, hide: hide}
	ctx, cancel := context.WithTimeout(context.Background(), usernsProbeWait)
	defer cancel()
	dir, err := os.MkdirTemp("", "corral-userns-probe")
	if err != nil {
		return nil, fmt.Errorf("local desktops are off: %w", err)
	}
	defer os.RemoveAll(dir)
	probe := &DesktopUser{UID: os.Getuid(), GID: os.Getgid(), prlimit: prlimit, ns: &memberNS{userns: ns, name: "probe", run: dir, home: dir, tmp: dir}}
	if uid >= 0 {
		probe.UID, probe.GID, probe.own = uid, uid, true
		if err := probe.give(dir); err != nil {
			return nil, fmt.Errorf("local desktops are off: %w", err)
		}
	}
	why, err := probeUserns(ctx, probe)
	if killedByOthers(err) {
		// A probe killed by a signal the portal did not send (a stray
		// kill, the OOM killer of a busy machine) proves nothing about
		// the namespaces: it is asked once more.
		why, err = probeUserns(ctx, probe)
	}
	if err != nil {
		if why == "" {
			why = err.Error()
		}
		if uid >= 0 {
			who = fmt.Sprintf("bubblewrap cannot make the namespaces each desktop runs in as its uid (%d)", uid)
		} else {
			who = "the portal is not root, and bubblewrap cannot make the user namespaces each desktop runs in"
		}
		return nil, fmt.Errorf("local desktops are off: %s (%s): allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000, and on older Debian kernels kernel.unprivileged_userns_clone=1; in a container, a seccomp profile that allows them), %s", who, why, fix)
	}
	return ns, nil
}

// probeUserns runs /bin/true in probe's sandbox and returns what bwrap
// said on stderr and how it ended; one that gives no answer within ctx is
// killed with its whole process group.
func probeUserns(ctx context.Context, probe *DesktopUser) (string, error) {
	cmd := probe.command("/bin/true")
	// A process group of its own, so that a probe that hangs is killed
	// whole: a child left behind would hold stderr's pipe open and Wait
	// with it, for as long as the child lives.
	cmd.SysProcAttr = probe.sysProcAttr(&syscall.SysProcAttr{Setpgid: true})
	cmd.WaitDelay = time.Second // and should one escape the group all the same
	cmd.Env = []string{"PATH=" + defaultDesktopPath}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start bwrap: %w", err)
	}
	shell := procgroup.Lead(cmd)
	var err error
	select {
	case <-shell.Ended():
		err = shell.Wait()
	case <-ctx.Done():
		shell.Signal(syscall.SIGKILL)
		err = fmt.Errorf("no answer in %s (%v)", usernsProbeWait, shell.Wait())
	}
	return strings.TrimSpace(stderr.String()), err
}

// killedByOthers reports whether err is a probe's end by a signal that
// probeUserns did not send: the shell that runs bubblewrap was killed, or
// it says bubblewrap was (exit status 128+SIGKILL).
func killedByOthers(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	st, ok := exit.Sys().(syscall.WaitStatus)
	return ok && (st.Signaled() || st.Exited() && st.ExitStatus() == 128+int(syscall.SIGKILL))
}

// memberNS is the namespaced sandbox of one member: the folders of its own
// that its processes see, at paths that say nothing of the portal's:
// run at /run/desktop, home at /home/<member>, tmp at /tmp.
type memberNS struct {
	*userns
	name      string // the member's name, the namespace's host name
	dir       string // the member's folder: its passwd and group files; "" for none
	run, home string // bound read-write inside
	holder    bool   // the desktop's network holder: namespaces only, made in one step
	tmp       string // bound read-write at /tmp and /var/tmp
	scratch   string // its /run, /var and /dev/shm where bounded together (sandbox_scratch.go)
	disk      uint64 // the disk bound; 0 for none
	devices   []string
	hostNet   bool // keeps the portal's network namespace (a VM's loopback consoles)
}

// usernsRun is where a namespaced desktop sees its run folder.
const usernsRun = "/run/desktop"

// insideHome is where the member's processes see its home.
func (m *memberNS) insideHome() string { return "/home/" + m.name }

// inside rewrites the paths of the member's run and home folders in s (an
// argument or an environment value) to where its processes see them.
func (m *memberNS) inside(s string) string {
	s = strings.ReplaceAll(s, m.run, usernsRun)
	return strings.ReplaceAll(s, m.home, m.insideHome())
}

// args returns bwrap's options for one process of the member, ending with
// "--". A terminal keeps its session (its shell needs the pty as its
// controlling terminal); anything else gets a new one, so it cannot push
// input into a terminal it inherited.
// A process that joins the desktop's network namespace (sharedNet) makes
// all the others but that one.
func (m *memberNS) args(terminal, sharedNet bool) []string {
	if m.holder {
		return append(append([]string{"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"}, m.systemBinds()...), "--chdir", "/", "--")
	}
	unshare := []string{"--unshare-all"} // user, pid, network, ipc, uts, cgroup
	if sharedNet || m.hostNet {
		unshare = []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	}
	a := append(append(unshare, "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev"), m.scratchArgs()...)
	if m.name != "" {
		a = append(a, "--hostname", m.name)
	}
	// With its parent (the portal for a terminal, a shell of its own for a
	// desktop process: see commandFor) everything in it dies.
	a = append(a, "--die-with-parent")
	if !terminal {
		a = append(a, "--new-session")
	}
	a = append(a, m.systemBinds()...)
	for _, path := range m.hide {
		if !underAny(path, usernsRootDirs) {
			continue // not in sight anyway
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", path)
		} else if err == nil {
			a = append(a, "--ro-bind", "/dev/null", path)
		}
	}
	if m.dir != "" { // the member's account: whoami, ~ and the prompt read right
		a = append(a, "--ro-bind", filepath.Join(m.dir, passwdName), "/etc/passwd", "--ro-bind", filepath.Join(m.dir, groupName), "/etc/group")
	}
	for _, dev := range m.devices {
		a = append(a, "--dev-bind-try", dev, dev)
	}
	a = append(a, "--bind", m.tmp, "/tmp", "--bind", m.tmp, "/var/tmp", "--bind", m.run, usernsRun, "--bind", m.home, m.insideHome())
	// The root (bubblewrap's tmpfs, the member's to write) is read-only
	// once every mount point on it is made: what the member writes goes
	// to its bounded folders.
	return append(a, "--remount-ro", "/", "--chdir", m.insideHome(), "--")
}

// systemBinds returns bubblewrap's options that show the host's system
// folders (usernsRootDirs) read-only.
func (m *memberNS) systemBinds() []string {
	var a []string
	for _, dir := range usernsRootDirs {
		fi, err := os.Lstat(dir)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(dir); err == nil {
				a = append(a, "--symlink", target, dir)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", dir, dir)
		}
	}
	return a
}

// underAny reports whether path is one of dirs or inside one.
func underAny(path string, dirs []string) bool {
	path = filepath.Clean(path)
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// freshTmp makes the member's /tmp anew, the uid's, with the X socket
// folders X expects in it, and its account files. Nothing of the uid runs
// any more, so nothing races it; RemoveAll never follows a symlink.
func (u *DesktopUser) freshTmp() error {
	m := u.ns
	if err := u.freshDisk(m.tmp); err != nil {
		return err
	}
	if err := u.writeAccount(); err != nil {
		return err
	}
	for _, dir := range x11Dirs {
		path := filepath.Join(m.tmp, strings.TrimPrefix(dir, "/tmp/"))
		if err := os.Mkdir(path, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o777|os.ModeSticky); err != nil {
			return err
		}
	}
	return nil
}

// setEnv sets cmd's environment to env, with the member's paths as its
// processes see them.
func (u *DesktopUser) setEnv(cmd *exec.Cmd, env []string) {
	cmd.Env = env
	if u == nil || u.ns == nil {
		return
	}
	cmd.Env = make([]string, len(env))
	for i, kv := range env {
		cmd.Env[i] = u.ns.inside(kv)
	}
}

// killLeftovers kills whatever u's user left running: every process of
// its uid. A u of the portal's uid has nothing to kill: what its user
// started ends with the pid namespace of the desktop process or terminal
// it ran in.
func (u *DesktopUser) killLeftovers(timeout time.Duration) error {
	if u == nil || !u.own {
		return nil
	}
	return killUID(u.UID, timeout)
}
