package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A portal that is not root cannot give a desktop a uid of its own. It
// runs each of the desktop's processes in namespaces of its own instead,
// made by bubblewrap: a user namespace (no privilege over anything
// outside), a pid namespace (the portal and every other process out of
// sight and out of reach of signals; when the process ends, all it left
// behind is killed with it), a network namespace with nothing but its own
// loopback (the portal's port, the host's abstract sockets and the network
// out of reach), and a mount namespace that holds the system read-only
// (/usr, /etc) and, of the portal's files, only the member's own run, home
// and tmp folders. The portal's data dir, its secrets and the home of the
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

// newUserns finds bubblewrap and checks it can make the namespaces here.
// The error is one line saying what to change.
func newUserns(hide []string, prlimit string) (*userns, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("local desktops are off: the portal is not root, so each desktop runs in user namespaces made by bubblewrap, and bwrap is not installed: install the Debian package bubblewrap, or run the portal as root")
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
	cmd := probe.command("/bin/true")
	cmd.Env = []string{"PATH=" + defaultDesktopPath}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local desktops are off: start bwrap: %w", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		err = <-done
		err = fmt.Errorf("no answer in %s (%v)", usernsProbeWait, err)
	}
	if err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		return nil, fmt.Errorf("local desktops are off: the portal is not root, and bubblewrap cannot make the user namespaces each desktop runs in (%s): allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000, and on older Debian kernels kernel.unprivileged_userns_clone=1; in a container, a seccomp profile that allows them), or run the portal as root", why)
	}
	return ns, nil
}

// memberNS is the namespaced sandbox of one member: the folders of its own
// that its processes see, at paths that say nothing of the portal's:
// run at /run/desktop, home at /home/<member>, tmp at /tmp.
type memberNS struct {
	*userns
	name      string // the member's name, the namespace's host name
	run, home string // bound read-write inside
	tmp       string // bound read-write at /tmp
	devices   []string
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
func (m *memberNS) args(terminal bool) []string {
	a := []string{
		"--unshare-all", // user, pid, network, ipc, uts, cgroup
		"--die-with-parent",
		"--cap-drop", "ALL",
		"--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/run", "--tmpfs", "/var", "--dir", "/var/tmp",
	}
	if m.name != "" {
		a = append(a, "--hostname", m.name)
	}
	if !terminal {
		a = append(a, "--new-session")
	}
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
	for _, dev := range m.devices {
		a = append(a, "--dev-bind-try", dev, dev)
	}
	a = append(a, "--bind", m.tmp, "/tmp", "--bind", m.run, usernsRun, "--bind", m.home, m.insideHome())
	return append(a, "--chdir", m.insideHome(), "--")
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

// freshTmp makes the member's /tmp anew, with the X socket folders X
// expects in it.
func (m *memberNS) freshTmp() error {
	if err := os.RemoveAll(m.tmp); err != nil {
		return err
	}
	if err := os.Mkdir(m.tmp, 0o700); err != nil {
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
// its uid. A namespaced u has nothing to kill: what its user started ends
// with the pid namespace of the desktop process or terminal it ran in.
func (u *DesktopUser) killLeftovers(timeout time.Duration) error {
	if u == nil || u.ns != nil {
		return nil
	}
	return killUID(u.UID, timeout)
}
