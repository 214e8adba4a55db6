package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A desktop's network is a network namespace of its own, never the
// host's. With NetworkNone each of its processes has only a loopback of
// its own. With NetworkOutbound all its processes share one network
// namespace, held by a process that only sleeps ("netns", the first
// recorded), and pasta (Debian's passt) links it to the host's network as
// a user-mode stack: pasta runs as the desktop's uid, in its cgroup, so
// every connection it opens on the host is the desktop's uid's; it maps
// neither the gateway to the host (--no-map-gw) nor any port either way
// (-t/-u/-T/-U none: its default "auto" would forward the host's
// loopback ports, the portal's among them, into the desktop). The host's
// loopback is out of reach: 127.0.0.1 in the desktop is its own; its
// other addresses are behind the host fence (hostfence.go). Both are
// stopped with the desktop and adopted with it after a restart.

// NetworkNone and NetworkOutbound are a desktop's network policies.
const (
	NetworkNone     = "none"
	NetworkOutbound = "outbound"
)

// Process names of a desktop's network.
const (
	netnsHolder = "netns"
	netPasta    = "pasta"
)

// netReadyWait bounds the wait for pasta to configure the namespace.
var netReadyWait = 5 * time.Second

// tunDevice is what pasta opens as the desktop's uid (a var: tests point
// it elsewhere).
var tunDevice = "/dev/net/tun"

// netTools are the programs of outbound networks, found once.
type netTools struct {
	pasta, nsenter string
}

// findNetTools finds pasta and nsenter, and checks the desktops' uid may
// open the tun device; the error says in one line what to change.
func findNetTools() (*netTools, error) {
	pasta, err := exec.LookPath("pasta")
	if err != nil {
		return nil, errors.New("outbound network for local desktops is off: pasta not found: install the Debian package passt")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, errors.New("outbound network for local desktops is off: nsenter not found: install the Debian package util-linux")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(tunDevice, &st); err != nil {
		return nil, fmt.Errorf("outbound network for local desktops is off: %s: %v: load the tun module (modprobe tun), or in a container pass the device in", tunDevice, err)
	}
	mode := st.Mode & 0o777
	if mode&0o006 != 0o006 {
		return nil, fmt.Errorf("outbound network for local desktops is off: %s is mode %04o, and each desktop's network stack opens it as the desktop's uid: chmod 0666 %s (Debian's default; it lets a user make tun devices only in namespaces of their own)", tunDevice, mode, tunDevice)
	}
	return &netTools{pasta: pasta, nsenter: nsenter}, nil
}

// desktopNet is the shared network namespace of one desktop's processes.
type desktopNet struct {
	*netTools
	holder *desktopProc // the netns process (bubblewrap), once started
	ns     int          // the PID inside it whose namespaces processes join
}

// nsenterArgs returns the command that runs argv in the desktop's user
// and network namespaces (bubblewrap then makes the rest).
func (n *desktopNet) nsenterArgs(argv []string) []string {
	p := "/proc/" + strconv.Itoa(n.ns) + "/ns/"
	return append([]string{n.nsenter, "--user=" + p + "user", "--net=" + p + "net", "--preserve-credentials", "--"}, argv...)
}

// chooseNetwork gives u the shared network namespace of policy
// NetworkOutbound, where this host can (else it logs why the desktop has
// none).
func (u *DesktopUser) chooseNetwork(policy string, log *slog.Logger) {
	if u == nil || u.ns == nil || policy != NetworkOutbound {
		return
	}
	if u.tools == nil {
		log.Warn("desktop has no outbound network", "err", u.netErr)
		return
	}
	u.net = &desktopNet{netTools: u.tools}
}

// joined reports whether u's processes join a desktop network that is up.
func (u *DesktopUser) joined() bool { return u != nil && u.net != nil && u.net.ns > 0 }

// startNetwork starts the desktop's network namespace and its pasta, and
// waits until the namespace has a route out.
func (d *Desktop) startNetwork(ctx context.Context) error {
	u := d.spec.User
	holder, err := startDesktopProc(netnsHolder, d.spec.State, "/bin/sleep", []string{"infinity"}, []string{"PATH=" + defaultDesktopPath}, "/", nil, u.holderUser())
	if err != nil {
		return err
	}
	d.procs = append(d.procs, holder)
	if err := d.writePids(); err != nil {
		return err
	}
	if err := u.net.adopt(ctx, holder, d.spec.State); err != nil {
		return err
	}
	return d.startPasta(ctx)
}

// holderUser is u for the netns process: namespaces of its own made in one
// step (no /dev, no /proc: bubblewrap then makes a single user namespace,
// the one that owns the network namespace, which nsenter must join).
func (u *DesktopUser) holderUser() *DesktopUser {
	h := *u
	ns := *u.ns
	ns.holder = true
	h.ns, h.net = &ns, nil
	return &h
}

// adopt finds the PID inside holder's namespaces.
func (n *desktopNet) adopt(ctx context.Context, holder *desktopProc, state string) error {
	ctx, cancel := context.WithTimeout(ctx, netReadyWait)
	defer cancel()
	host, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder.PID))
	for {
		if pid := nsInit(holder.PID, host); pid > 0 && holder.alive() {
			n.holder, n.ns = holder, pid
			return nil
		}
		if !holder.alive() {
			log := filepath.Join(state, netnsHolder+".log")
			return fmt.Errorf("the desktop's network namespace did not start: its process exited: %s (see %s)", lastLogLine(log), log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the desktop's network namespace did not start: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// startPasta starts pasta on the desktop's namespace, as its uid and in
// its cgroup, and waits for the namespace's default route.
func (d *Desktop) startPasta(ctx context.Context) error {
	u := d.spec.User
	n := u.net
	args := []string{"-f", "-q", "--config-net", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none", strconv.Itoa(n.ns)}
	pu := *u // pasta runs on the host as the uid: no namespaces of its own
	pu.ns, pu.net = nil, nil
	p, err := startDesktopProc(netPasta, d.spec.State, n.pasta, args, []string{"PATH=" + defaultDesktopPath}, "/", nil, pu.direct())
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := d.writePids(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, netReadyWait)
	defer cancel()
	for !hasDefaultRoute(n.ns) {
		if !p.alive() {
			return fmt.Errorf("pasta exited: %s (see %s)", lastLogLine(filepath.Join(d.spec.State, netPasta+".log")), filepath.Join(d.spec.State, netPasta+".log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pasta gave the desktop no route out: %w (see %s)", ctx.Err(), filepath.Join(d.spec.State, netPasta+".log"))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// direct marks u to run its program as is: as its uid (and in its
// cgroup), without prlimit or namespaces.
func (u *DesktopUser) direct() *DesktopUser {
	u.bare = true
	return u
}

// hasDefaultRoute reports whether pid's network namespace has an IPv4
// default route.
func hasDefaultRoute(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/route")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "00000000" {
			return true
		}
	}
	return false
}

// nsInit returns the first process below pid (its shell, bubblewrap,
// bubblewrap's init) in a network namespace other than host that runs a
// command already (before that a child may be a passing helper), or 0.
func nsInit(pid int, host string) int {
	for range 4 {
		kids := childPIDs(pid)
		if len(kids) == 0 {
			return 0
		}
		pid = kids[0]
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns != host && len(childPIDs(pid)) > 0 {
			return pid
		}
	}
	return 0
}

// childPIDs returns the PIDs of pid's children.
func childPIDs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var kids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			kids = append(kids, n)
		}
	}
	return kids
}

// adoptNetwork finds the live netns process among an adopted desktop's
// processes, and reports whether there was one.
func adoptNetwork(n *desktopNet, live []*desktopProc, state string) bool {
	for _, p := range live {
		if p.Name == netnsHolder {
			return n.adopt(context.Background(), p, state) == nil
		}
	}
	return false
}

// restartPasta starts pasta again for an adopted desktop whose pasta is
// gone (its namespace is still there).
func (d *Desktop) restartPasta() error {
	if !d.spec.User.joined() {
		return nil
	}
	for i, p := range d.procs {
		if p.Name == netPasta {
			if p.alive() {
				return nil
			}
			d.procs = append(d.procs[:i], d.procs[i+1:]...)
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), netReadyWait)
	defer cancel()
	return d.startPasta(ctx)
}
