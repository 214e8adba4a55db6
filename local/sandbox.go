package local

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A sandboxed desktop of a root portal runs as a uid of its own (in
// namespaces of its own too: sandbox_userns.go), allocated to its member
// from a range no account of the host uses (CORRAL_VDI_DESKTOP_UIDS), so
// that the kernel keeps it away from the portal's files and processes and
// from every other desktop. The member records its uid in a file the portal
// owns; a host-wide registry (one symlink per uid under /run) keeps two
// portals on one host, or two members, from sharing a uid.

// DefaultDesktopUIDs is the uid range of sandboxed desktops unless
// CORRAL_VDI_DESKTOP_UIDS says otherwise: between what Debian hands out to
// accounts (up to 59999, nobody at 65534) and to subordinate ids (from
// 100000, 65536 per user, so a range at 200000 meets the second user's).
const DefaultDesktopUIDs = "80000-80999"

// defaultUIDRegistry holds one symlink per allocated uid, naming the member
// folder that holds it.
const defaultUIDRegistry = "/run/corral-vdi/desktop-uids"

// memberUIDName is the file in a member's folder that records its uid.
const memberUIDName = "uid"

// memberTmpName is the folder in a member's folder that is /tmp to its
// namespaced desktop.
const memberTmpName = "tmp"

// memberStateName is the folder in a member's folder that holds its
// processes' logs, pids file and RDP password (the portal's, 0700).
const memberStateName = "state"

// DesktopUser is who a sandboxed desktop's processes run as, and within
// which limits.
type DesktopUser struct {
	UID, GID int
	Limits   Limits
	// Groups are supplementary groups of its processes; none for a
	// desktop (QEMU gets /dev/kvm's).
	Groups []uint32

	prlimit string // the path of prlimit, which sets Limits
	// ns, when set, runs each process in namespaces of its own made by
	// bubblewrap: always for a desktop of a sandbox.
	ns *memberNS
	// own says UID is the desktop's own (a root portal), so that every
	// process of it is the desktop's; else UID and GID are the portal's.
	own bool
	// cg is the desktop's cgroup, nil where the host gives none.
	cg *desktopCgroup
	// net, when set, is the network namespace all the desktop's processes
	// share (NetworkOutbound); tools and netErr are what it needs, or why
	// this host cannot give it.
	net    *desktopNet
	tools  *netTools
	netErr error
	// homes make a persistent member's home image, nil where the host
	// cannot (homeErr says why).
	homes   *homeDisks
	homeErr error
	bare    bool // run the program as is: no prlimit, no namespaces (pasta)
}

// SandboxConfig configures NewSandbox.
type SandboxConfig struct {
	// Mode is SandboxAuto (empty), SandboxUIDs or SandboxUserns
	// (CORRAL_VDI_DESKTOP_SANDBOX).
	Mode string
	// Hide are the portal's secret files and folders, masked in a
	// namespaced desktop's view of the system folders.
	Hide []string
	// UIDs is the range "FIRST-LAST" desktops' uids (and gids) come from;
	// empty means DefaultDesktopUIDs.
	UIDs string
	// Limits are the resource limits of every desktop; see ParseLimits.
	Limits Limits
	// Registry is the host-wide folder of uid allocations; empty means
	// /run/corral-vdi/desktop-uids.
	Registry string
	// Passwd and Group are the account files a range must not collide
	// with; empty means /etc/passwd and /etc/group.
	Passwd, Group string
	// SubUID and SubGID are the subordinate id files (rootless
	// containers' uids) a range must not overlap; empty means /etc/subuid
	// and /etc/subgid.
	SubUID, SubGID string
	// LoopControl is the loop device allocator whose presence says the
	// host has loop devices for home images; empty means /dev/loop-control.
	LoopControl string
}

// Sandbox allocates desktop uids to members and starts their processes as
// those uids.
type Sandbox struct {
	first, last int
	limits      Limits
	registry    string
	prlimit     string
	ns          *userns // how desktops' namespaces are made (bubblewrap)
	ownUIDs     bool    // desktops run as uids of their own (a root portal)
	cg          *cgroups
	net         *netTools // nil: no outbound network here, netErr says why
	netErr      error
	homes       *homeDisks // nil: no home images here, homeErr says why
	homeErr     error
	fence       *HostFence // installed by FenceHost

	mu sync.Mutex // serialises allocations
}

// NewSandbox checks cfg and that this process may run desktops as other
// uids. Every error is one line saying what to change.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	if cfg.UIDs == "" {
		cfg.UIDs = DefaultDesktopUIDs
	}
	if cfg.Registry == "" {
		cfg.Registry = defaultUIDRegistry
	}
	if cfg.Passwd == "" {
		cfg.Passwd = "/etc/passwd"
	}
	if cfg.Group == "" {
		cfg.Group = "/etc/group"
	}
	if cfg.SubUID == "" {
		cfg.SubUID = "/etc/subuid"
	}
	if cfg.SubGID == "" {
		cfg.SubGID = "/etc/subgid"
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, errors.New("local desktops are off: prlimit not found (it sets each desktop's limits): install the Debian package util-linux")
	}
	switch cfg.Mode {
	case "", SandboxAuto:
		if os.Geteuid() != 0 {
			cfg.Mode = SandboxUserns
		}
	case SandboxUIDs:
		if uid := os.Geteuid(); uid != 0 {
			return nil, fmt.Errorf("local desktops are off: CORRAL_VDI_DESKTOP_SANDBOX=uids, but the portal runs as uid %d, not root, so it cannot give each desktop a uid of its own; run the portal as root, or set CORRAL_VDI_DESKTOP_SANDBOX=userns (desktops then run in user namespaces made by bubblewrap)", uid)
		}
	case SandboxUserns:
		if os.Geteuid() == 0 && !usernsAsRoot {
			return nil, errors.New("local desktops are off: CORRAL_VDI_DESKTOP_SANDBOX=userns, but the portal runs as root, and a namespaced desktop would still own root's files; as root, leave it auto (each desktop gets a uid of its own)")
		}
	default:
		return nil, fmt.Errorf("local desktops are off: CORRAL_VDI_DESKTOP_SANDBOX %q is not auto, uids or userns", cfg.Mode)
	}
	if cfg.Mode == SandboxUserns {
		ns, err := newUserns(cfg.Hide, prlimit, -1)
		if err != nil {
			return nil, err
		}
		// No outbound network: nothing could fence it off the host (errNoFence).
		_, homeErr := findHomeDisks(false, "")
		return &Sandbox{first: 1, last: 0, limits: cfg.Limits, prlimit: prlimit, ns: ns, cg: detectCgroups(), netErr: errNoFence, homeErr: homeErr}, nil
	}
	first, last, err := parseUIDRange(cfg.UIDs)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct{ path, what string }{{cfg.Passwd, "user"}, {cfg.Group, "group"}} {
		if name, id, ok := accountInRange(f.path, first, last); ok {
			return nil, fmt.Errorf("local desktops are off: CORRAL_VDI_DESKTOP_UIDS %d-%d includes the %s %s (id %d) of %s; set it to a range no account uses", first, last, f.what, name, id, f.path)
		}
	}
	for _, path := range []string{cfg.SubUID, cfg.SubGID} {
		if name, start, count, ok := subIDsInRange(path, first, last); ok {
			return nil, fmt.Errorf("local desktops are off: CORRAL_VDI_DESKTOP_UIDS %d-%d overlaps the subordinate ids %d-%d of %s in %s (its containers may run as them); set it to a range no account uses", first, last, start, start+count-1, name, path)
		}
	}
	if err := os.MkdirAll(cfg.Registry, 0o700); err != nil {
		return nil, fmt.Errorf("local desktops are off: uid registry: %w", err)
	}
	// The desktops' own uids make their namespaces too: the probe runs as
	// a uid of the range, one it holds in the registry meanwhile. Any other
	// might be a member's, of this portal or another on the host, whose
	// wipe (killUID) would kill the probe with it.
	probeUID, unclaim, err := claimProbeUID(cfg.Registry, first, last)
	if err != nil {
		return nil, err
	}
	ns, err := newUserns(cfg.Hide, prlimit, probeUID)
	unclaim()
	if err != nil {
		return nil, err
	}
	net, netErr := findNetTools()
	homes, homeErr := findHomeDisks(true, cfg.LoopControl)
	return &Sandbox{first: first, last: last, limits: cfg.Limits, registry: cfg.Registry, prlimit: prlimit, ns: ns, ownUIDs: true, cg: detectCgroups(), net: net, netErr: netErr, homes: homes, homeErr: homeErr}, nil
}

// parseUIDRange parses "FIRST-LAST". Root (0) and ids that the kernel or
// NFS treat specially are refused, so no desktop can ever be root or the
// portal.
func parseUIDRange(s string) (first, last int, err error) {
	bad := func(why string) (int, int, error) {
		return 0, 0, fmt.Errorf("local desktops are off: CORRAL_VDI_DESKTOP_UIDS %q %s; want FIRST-LAST, e.g. %s", s, why, DefaultDesktopUIDs)
	}
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return bad("is not a range")
	}
	if first, err = strconv.Atoi(a); err != nil {
		return bad("does not start with a number")
	}
	if last, err = strconv.Atoi(b); err != nil {
		return bad("does not end with a number")
	}
	switch {
	case first < 1000:
		return bad("starts below 1000, among system accounts")
	case last < first:
		return bad("ends before it starts")
	case last >= 1<<31-1 || last == 65534 || (first <= 65534 && 65534 <= last):
		return bad("includes nobody (65534) or the invalid uid")
	case os.Getuid() >= first && os.Getuid() <= last:
		return bad("includes the portal's own uid")
	}
	return first, last, nil
}

// accountInRange returns the first entry of an account file (passwd or
// group format: name:x:id:...) whose id is in [first, last].
func accountInRange(path string, first, last int) (name string, id int, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if n, err := strconv.Atoi(fields[2]); err == nil && n >= first && n <= last {
			return fields[0], n, true
		}
	}
	return "", 0, false
}

// subIDsInRange returns the first entry of a subordinate id file
// (name:start:count) whose ids overlap [first, last].
func subIDsInRange(path string, first, last int) (name string, start, count int, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 {
			continue
		}
		s, err1 := strconv.Atoi(fields[1])
		n, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && n > 0 && s <= last && s+n-1 >= first {
			return fields[0], s, n, true
		}
	}
	return "", 0, 0, false
}

// Owns reports whether uid is one the sandbox hands to desktops. A
// desktop of a portal that is not root has none (it runs as the portal's
// uid).
func (s *Sandbox) Owns(uid int) bool {
	return s != nil && s.ownUIDs && uid >= s.first && uid <= s.last
}

// Range returns the sandbox's uid range as FIRST-LAST.
func (s *Sandbox) Range() string { return fmt.Sprintf("%d-%d", s.first, s.last) }

// Namespaced reports whether desktops run as the portal's own uid, kept
// apart by their namespaces alone (a portal that is not root), rather than
// as uids of their own (in namespaces too).
func (s *Sandbox) Namespaced() bool { return s != nil && !s.ownUIDs }

// Describe says in a few words how desktops are kept apart, for the log.
func (s *Sandbox) Describe() string {
	const ns = "user, pid, mount, UTS, IPC and network namespaces (bubblewrap)"
	if s.Namespaced() {
		return ns
	}
	return "uids " + s.Range() + " in " + ns
}

// MissingLimits says in one line which kernel limits across a desktop's
// processes this host does not give (doctor and the log show it); "" when
// none is missing.
func (s *Sandbox) MissingLimits() string {
	var parts []string
	for _, m := range []string{s.cg.Missing(), s.diskMissing()} {
		if m != "" {
			parts = append(parts, m)
		}
	}
	return strings.Join(parts, "; ")
}

// NetworkMissing says in one line why desktops cannot have outbound
// network here; "" when they can.
func (s *Sandbox) NetworkMissing() string {
	if s == nil || s.netErr == nil {
		return ""
	}
	return s.netErr.Error()
}

// KernelLimits names the kernel limits desktops get, for the log.
func (s *Sandbox) KernelLimits() string { return s.cg.Describe() }

// user returns the uid of the member whose folder is dir, allocating one
// when it has none. The record in dir (owned by the portal) wins; the
// registry entry is (re)made to match it.
func (s *Sandbox) user(dir string) (*DesktopUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if !s.ownUIDs {
		u := s.desktopUser(os.Getuid(), abs)
		u.GID = os.Getgid()
		return s.withCgroup(u)
	}
	if uid, err := readMemberUID(abs); err == nil {
		if err := s.register(uid, abs); err != nil {
			return nil, err
		}
		return s.withCgroup(s.desktopUser(uid, abs))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for uid := s.first; uid <= s.last; uid++ {
		if err := s.register(uid, abs); err != nil {
			continue
		}
		if err := writeMemberUID(abs, uid); err != nil {
			os.Remove(s.entry(uid))
			return nil, err
		}
		return s.withCgroup(s.desktopUser(uid, abs))
	}
	return nil, fmt.Errorf("local desktops: every uid of CORRAL_VDI_DESKTOP_UIDS %s is taken (see %s); widen the range", s.Range(), s.registry)
}

// desktopUser returns the user of the member whose folder is dir, running
// as uid in namespaces of its own.
func (s *Sandbox) desktopUser(uid int, dir string) *DesktopUser {
	return &DesktopUser{UID: uid, GID: uid, Limits: s.limits, prlimit: s.prlimit, own: s.ownUIDs, tools: s.net, netErr: s.netErr, homes: s.homes, homeErr: s.homeErr,
		ns: &memberNS{userns: s.ns, name: filepath.Base(dir), dir: dir, disk: s.limits.Disk,
			run: filepath.Join(dir, "run"), home: filepath.Join(dir, "home"), tmp: filepath.Join(dir, memberTmpName), scratch: filepath.Join(dir, memberScratchName)}}
}

// withCgroup gives u its member's cgroup, where the host has them.
func (s *Sandbox) withCgroup(u *DesktopUser) (*DesktopUser, error) {
	cg, err := s.cg.forDesktop(u.ns.dir, u.Limits, u.UID, u.GID)
	if err != nil {
		return nil, fmt.Errorf("local: desktop %s: %w", u.ns.name, err)
	}
	u.cg = cg
	return u, nil
}

func (s *Sandbox) entry(uid int) string { return filepath.Join(s.registry, strconv.Itoa(uid)) }

// register claims uid for the member folder dir in the host-wide registry.
// An entry whose member folder is gone (a deleted pool or data directory)
// is stale and taken over.
func (s *Sandbox) register(uid int, dir string) error {
	for range 2 {
		err := os.Symlink(dir, s.entry(uid))
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return err
		}
		target, err := os.Readlink(s.entry(uid))
		if err != nil {
			return err
		}
		if target == dir {
			return nil
		}
		if owner, err := readMemberUID(target); err == nil && owner == uid {
			return fmt.Errorf("local desktops: uid %d is taken by %s", uid, target)
		}
		if err := os.Remove(s.entry(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fmt.Errorf("local desktops: uid %d: registry busy", uid)
}

// claimProbeUID holds a uid of first..last for the userns probe in the
// registry, as a member would hold it, until unclaim; with every uid a
// member's it gives the first, held by nobody.
func claimProbeUID(registry string, first, last int) (uid int, unclaim func(), err error) {
	dir, err := os.MkdirTemp("", "corral-uid-probe")
	if err != nil {
		return 0, nil, fmt.Errorf("local desktops are off: %w", err)
	}
	s := &Sandbox{registry: registry}
	for uid := first; uid <= last; uid++ {
		if writeMemberUID(dir, uid) != nil || s.register(uid, dir) != nil {
			continue
		}
		return uid, func() { os.Remove(s.entry(uid)); os.RemoveAll(dir) }, nil
	}
	// Every uid is a member's: the probe takes its chance with the first.
	os.RemoveAll(dir)
	return first, func() {}, nil
}

// release frees the uid of the member folder dir (its member is deleted).
func (s *Sandbox) release(dir string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	abs, _ := filepath.Abs(dir)
	uid, err := readMemberUID(abs)
	if err != nil {
		return
	}
	if target, err := os.Readlink(s.entry(uid)); err == nil && target == abs {
		os.Remove(s.entry(uid))
	}
}

// readMemberUID reads the uid recorded in a member's folder.
func readMemberUID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, memberUIDName))
	if err != nil {
		return 0, err
	}
	uid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("local: %s: %w", filepath.Join(dir, memberUIDName), err)
	}
	return uid, nil
}

func writeMemberUID(dir string, uid int) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	tmp := filepath.Join(dir, memberUIDName+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(uid)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, memberUIDName))
}
