// Package local is the embedded default backend: pools of real session
// desktops (Xvnc + a window manager + a terminal, shared over VNC and, with
// freerdp-shadow, over RDP) on the machine the portal runs on. Pools live in the portal's database; each member's processes,
// socket and home live in its own private folder under the data directory,
// so two portals with different data directories never touch each other's
// desktops, and a restarted portal re-adopts what it started.
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Namespace is the namespace of every local desktop.
const Namespace = "local"

// startTimeout bounds how long a desktop may take to come up.
const startTimeout = 30 * time.Second

// Config configures a Backend.
type Config struct {
	DB *store.DB
	// Dir holds one private folder per member.
	Dir string
	Log *slog.Logger
	// VMImage is the folder of the kernel and initramfs vm pools boot;
	// empty means scripts/vm-image.sh's cache.
	VMImage string
	// VMImageCache is scripts/vm-image.sh's cache, where an empty VMImage
	// looks; empty means the user's cache folder (corral-vdi/vm-image).
	VMImageCache string
	// VMListenTCP puts each guest's VNC and serial line on loopback TCP
	// ports instead of Unix sockets in its private folder (see
	// vmEndpoints).
	VMListenTCP bool
	// VMAccel forces QEMU's accelerator: "kvm" or "tcg"; "" or "auto"
	// decides once per host (see accelerator).
	VMAccel string
	// KVMDevice is the device whose opening means KVM may be tried;
	// default /dev/kvm.
	KVMDevice string
	// Sandbox gives each session desktop a uid of its own. Nil runs
	// desktops as the portal's own user, which only tests may do: the
	// portal always sets Sandbox or Refuse.
	Sandbox *Sandbox
	// Refuse, when set, is why local desktops cannot run (no sandbox could
	// be set up): every start fails with it, while pools, claims and
	// history stay as they are.
	Refuse error
	// Network is the host-wide network of session desktops
	// (CORRAL_VDI_DESKTOP_NETWORK): NetworkOutbound (empty) lets each pool's
	// policy choose, outbound by default; NetworkNone gives every desktop
	// only a loopback, whatever its pool says.
	Network string
}

// Backend runs local pools' members as session desktops on this host.
type Backend struct {
	db      *store.DB
	dir     string
	log     *slog.Logger
	vmImage string
	// vmImageCache and vmListenTCP are Config's VMImageCache and
	// VMListenTCP.
	vmImageCache string
	vmListenTCP  bool
	accel        *accelerator
	sandbox      *Sandbox
	refuse       error
	network      string // Config.Network

	mu      sync.Mutex
	members map[string]*member // by name; only those started or adopted
}

var _ vdi.Backend = (*Backend)(nil)

// member is the runtime state of one member.
type member struct {
	power   vdi.Power
	reason  string
	desktop *Desktop
	vm      *VM           // members of vm pools run this instead of a desktop
	ready   chan struct{} // closed when a start finishes, either way
}

// New returns a Backend after re-adopting the desktops a previous run of the
// portal left running in dir and cleaning up what it cannot adopt.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	b := &Backend{db: cfg.DB, dir: cfg.Dir, log: cfg.Log, vmImage: cfg.VMImage, vmImageCache: cfg.VMImageCache, vmListenTCP: cfg.VMListenTCP, sandbox: cfg.Sandbox, refuse: cfg.Refuse, network: cfg.Network, members: map[string]*member{}}
	if b.log == nil {
		b.log = slog.Default()
	}
	qemu, _ := lookQEMU() // a pool of VMs says so when it is missing
	accel, err := newAccelerator(cfg.VMAccel, cfg.KVMDevice, accelFile(b.dir), qemu, b.log)
	if err != nil {
		return nil, err
	}
	b.accel = accel
	if err := os.MkdirAll(filepath.Join(b.dir, "members"), 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if b.refuse == nil && b.sandbox != nil {
		b.refuse = checkSandboxDirs(b.dir, b.sandbox)
	}
	if b.refuse != nil {
		b.log.Error(b.refuse.Error())
	} else if b.sandbox != nil {
		b.log.Info("local desktops are sandboxed", "by", b.sandbox.Describe(), "limits", b.sandbox.limits.String(), "kernel_limits", b.sandbox.KernelLimits())
		if err := b.sandbox.FenceHost(b.dir); err == nil && b.sandbox.fence != nil {
			b.log.Info("local desktops' networks are fenced off the host's addresses", "nftables", "inet "+b.sandbox.fence.Table())
		}
		if missing := b.sandbox.MissingLimits(); missing != "" {
			b.log.Warn("local desktops: " + missing)
		}
		if missing := b.sandbox.HomeMissing(); missing != "" {
			b.log.Warn("local desktops: " + missing)
		}
		if missing := b.sandbox.NetworkMissing(); missing != "" && b.network != NetworkNone {
			b.log.Warn(missing)
		}
	}
	pools, err := b.db.LocalPools(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		for _, name := range p.Members {
			if p.Kind == vdi.KindVM {
				b.adoptVM(name)
				continue
			}
			spec, err := b.desktopSpec(name)
			if err != nil {
				continue // never adopt a desktop that may not run
			}
			spec.Network, spec.Ephemeral = b.networkOf(p.Pool), p.Mode == vdi.ModeEphemeral
			d, err := AdoptDesktop(spec, b.log)
			if errors.Is(err, ErrNotRunning) {
				continue
			} else if err != nil {
				b.log.Warn("could not adopt desktop", "desktop", Namespace+"/"+name, "err", err)
				continue
			}
			b.log.Info("adopted running desktop", "desktop", Namespace+"/"+name, "display", d.Display())
			m := &member{power: vdi.PowerRunning, desktop: d, ready: closed()}
			b.members[name] = m
			go b.watch(name, m, d)
		}
	}
	return b, nil
}

// EnsureDemoPool creates an ephemeral pool "demo" of size members when
// there are no pools at all, so a first run has something to claim.
func (b *Backend) EnsureDemoPool(ctx context.Context, size int) error {
	pools, err := b.db.LocalPools(ctx)
	if err != nil || len(pools) > 0 {
		return err
	}
	p := store.LocalPool{Pool: vdi.Pool{Name: "demo", Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: "session"}}
	for i := 1; i <= size; i++ {
		p.Members = append(p.Members, fmt.Sprintf("demo-%d", i))
	}
	b.log.Info("created demo pool", "pool", "demo", "size", size)
	return b.db.CreateLocalPool(ctx, p)
}

// spec returns where member name's desktop lives.
func (b *Backend) spec(name string) DesktopSpec {
	dir := filepath.Join(b.dir, "members", name)
	return DesktopSpec{Name: name, Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home")}
}

// Pools returns every local pool.
func (b *Backend) Pools(ctx context.Context) ([]vdi.Pool, error) {
	pools, err := b.db.LocalPools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]vdi.Pool, len(pools))
	for i, p := range pools {
		out[i] = p.Pool
		out[i].Namespace = Namespace
	}
	return out, nil
}

// Pool returns one pool, or an ENotFound error naming it.
func (b *Backend) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	p, err := b.pool(ctx, namespace, name)
	return p.Pool, err
}

func (b *Backend) pool(ctx context.Context, namespace, name string) (store.LocalPool, error) {
	if namespace != Namespace {
		return store.LocalPool{}, notFound("pool", namespace+"/"+name)
	}
	p, err := b.db.LocalPool(ctx, name)
	if errors.Is(err, vdi.ErrNotFound) {
		return p, notFound("pool", namespace+"/"+name)
	}
	p.Namespace = Namespace
	return p, err
}

// Members returns the pool's members with their power state.
func (b *Backend) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	p, err := b.pool(ctx, namespace, pool)
	if err != nil {
		return nil, err
	}
	out := make([]vdi.Member, len(p.Members))
	for i, name := range p.Members {
		out[i] = b.status(p.Name, name)
	}
	return out, nil
}

// Member returns one member, or an ENotFound error naming it.
func (b *Backend) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	pool, err := b.poolOf(ctx, ref)
	if err != nil {
		return vdi.Member{}, err
	}
	return b.status(pool, ref.Name), nil
}

func (b *Backend) poolOf(ctx context.Context, ref vdi.Ref) (string, error) {
	if ref.Namespace == Namespace {
		pools, err := b.db.LocalPools(ctx)
		if err != nil {
			return "", err
		}
		for _, p := range pools {
			for _, name := range p.Members {
				if name == ref.Name {
					return p.Name, nil
				}
			}
		}
	}
	return "", notFound("desktop", ref.String())
}

func (b *Backend) status(pool, name string) vdi.Member {
	m := vdi.Member{Namespace: Namespace, Name: name, Pool: pool, Power: vdi.PowerStopped}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt := b.members[name]; rt != nil {
		m.Power, m.Reason = rt.power, rt.reason
	}
	if m.Power == vdi.PowerRunning {
		m.Protocols = []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolTerminal}
		// Xvnc types any character as a keysym and gives each screen
		// window a RandR output.
		m.ConsoleCaps = map[vdi.Protocol]vdi.Caps{vdi.ProtocolVNC: {Display: true, Clipboard: true, Resize: true, Unicode: true, Screens: true}}
		if d := b.members[name].desktop; d != nil && d.RDPSocket() != "" {
			m.Protocols = []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC, vdi.ProtocolTerminal}
			// freerdp-shadow has no clipboard channel, keeps its size and
			// drops Unicode keyboard events.
			m.ConsoleCaps[vdi.ProtocolRDP] = vdi.Caps{Display: true}
		}
		if v := b.members[name].vm; v != nil {
			// QEMU's VNC keymap is a US keyboard's; each of the display's
			// heads has its own VNC server (vm_endpoints.go).
			m.Protocols = []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolSerial}
			m.ConsoleCaps = map[vdi.Protocol]vdi.Caps{vdi.ProtocolVNC: {Display: true, Clipboard: true, Resize: true, Heads: v.Heads()}}
		}
	}
	return m
}

// Start starts the member's desktop and returns once its VNC socket answers.
// Concurrent calls share one start.
func (b *Backend) Start(ctx context.Context, ref vdi.Ref) error {
	pool, err := b.poolOf(ctx, ref)
	if err != nil {
		return err
	}
	b.mu.Lock()
	rt := b.members[ref.Name]
	if rt != nil && (rt.power == vdi.PowerRunning || rt.power == vdi.PowerStarting) {
		b.mu.Unlock()
		select {
		case <-rt.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		return b.startErr(ref.Name)
	}
	rt = &member{power: vdi.PowerStarting, ready: make(chan struct{})}
	b.members[ref.Name] = rt
	b.mu.Unlock()

	// The start outlives the request that asked for it, so that a user who
	// gives up waiting finds the desktop running when they come back.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	if b.isVMPool(ctx, pool) {
		return b.startVM(sctx, ref, rt)
	}
	spec, err := b.desktopSpec(ref.Name)
	if p, perr := b.db.LocalPool(ctx, pool); perr == nil {
		spec.Network, spec.Ephemeral = b.networkOf(p.Pool), p.Mode == vdi.ModeEphemeral
	}
	var d *Desktop
	if err == nil {
		d, err = StartDesktop(sctx, spec, b.log)
	}
	if err != nil && spec.User != nil {
		err = fmt.Errorf("%w (its limits: %s)", err, spec.User.Limits)
	}
	if err := b.settle(ref, rt, d, err); err != nil {
		return err
	}
	b.log.Info("desktop started", "desktop", ref, "display", d.Display())
	return nil
}

func (b *Backend) startErr(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt := b.members[name]; rt != nil && rt.power == vdi.PowerFailed {
		return errors.New(rt.reason)
	}
	return nil
}

// Stop stops the member's desktop; its home stays.
func (b *Backend) Stop(ctx context.Context, ref vdi.Ref) error {
	if _, err := b.poolOf(ctx, ref); err != nil {
		return err
	}
	b.mu.Lock()
	rt := b.members[ref.Name]
	if rt == nil {
		b.mu.Unlock()
		return nil
	}
	ready := rt.ready
	b.mu.Unlock()
	select { // let a start in progress finish so that nothing is orphaned
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	d, v := rt.desktop, rt.vm
	rt.desktop, rt.vm = nil, nil
	rt.power = vdi.PowerStopping
	b.mu.Unlock()
	var err error
	if d != nil {
		err = d.Stop()
	}
	if v != nil {
		err = v.Stop()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		rt.power, rt.reason = vdi.PowerFailed, "stop: "+err.Error()
		return err
	}
	delete(b.members, ref.Name)
	return nil
}

// Recreate stops the member and gives it a fresh, empty home; a sandboxed
// member also loses every process and temporary file of its uid.
func (b *Backend) Recreate(ctx context.Context, ref vdi.Ref) error {
	if err := b.Stop(ctx, ref); err != nil {
		return err
	}
	if err := b.wipeMember(ref.Name); err != nil {
		return fmt.Errorf("local: wipe %s: %w", ref, err)
	}
	// A process of the member's still ending can add a file while the
	// home is removed ("directory not empty", seen once with the portal
	// as nobody; which process wrote is not known: Stop has already hung
	// up and reaped the terminals' shells): remove again, and log what
	// appeared, which names the writer.
	home := b.spec(ref.Name).Home
	err := os.RemoveAll(home)
	for try := 0; err != nil && try < 10; try++ {
		if try == 0 {
			b.log.Info("a file appeared in a member's home while it was removed; removing it again", "member", ref.Name, "err", err, "found", leftIn(home))
		}
		time.Sleep(100 * time.Millisecond)
		err = os.RemoveAll(home)
	}
	if err != nil {
		return fmt.Errorf("local: wipe home of %s (still in it: %s): %w", ref, leftIn(home), err)
	}
	return nil
}

// Dial connects to the member's VNC or RDP server, or starts a shell on a
// pty for its terminal; for a VM, to its VNC server or serial line. An RDP
// connection is an *RDPConn, which also carries the server's sign-in; a
// terminal is a *TerminalConn, which takes resizes.
func (b *Backend) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	b.mu.Lock()
	rt := b.members[ref.Name]
	var d *Desktop
	var v *VM
	if rt != nil {
		d, v = rt.desktop, rt.vm
	}
	b.mu.Unlock()
	if v != nil {
		return dialVM(ctx, ref, v, p)
	}
	if p != vdi.ProtocolVNC && p != vdi.ProtocolRDP && p != vdi.ProtocolTerminal {
		return nil, vdi.Errorf(vdi.EInvalid, "Use RDP, VNC or the terminal for this desktop.", "Desktop %s has no %s console.", ref, p)
	}
	if d == nil {
		return nil, vdi.Errorf(vdi.EUnavailable, "Start it, then connect again.", "Desktop %s is not running.", ref)
	}
	if p == vdi.ProtocolTerminal {
		return d.StartTerminal()
	}
	if p == vdi.ProtocolRDP {
		return d.dialRDP(ctx)
	}
	return d.dialVNC(ctx)
}

// StopAll stops every desktop this backend runs and unmounts every
// member's disk bounds (their home and /tmp tmpfs, a persistent home's
// image), so that nothing of the desktops outlives the portal; it returns
// how many it stopped. The portal calls it on exit only when told to, since
// desktops normally outlive a portal restart, and at start when a run told
// to was killed before it could (SIGKILL): those desktops were adopted.
func (b *Backend) StopAll(ctx context.Context) int {
	b.mu.Lock()
	names := make([]string, 0, len(b.members))
	for name := range b.members {
		names = append(names, name)
	}
	b.mu.Unlock()
	for _, name := range names {
		if err := b.Stop(ctx, vdi.Ref{Namespace: Namespace, Name: name}); err != nil {
			b.log.Error("stop desktop", "desktop", Namespace+"/"+name, "err", err)
		}
	}
	if b.sandbox == nil {
		return len(names)
	}
	pools, err := b.db.LocalPools(ctx)
	if err != nil {
		b.log.Error("unmount desktops' disks", "err", err)
		return len(names)
	}
	for _, p := range pools {
		for _, name := range p.Members {
			if err := unmountMember(b.memberDir(name)); err != nil {
				b.log.Error("unmount desktop's disks", "desktop", Namespace+"/"+name, "err", err)
			}
		}
	}
	return len(names)
}

func notFound(what, name string) error {
	return vdi.Errorf(vdi.ENotFound, "Check the name, or pick one from the home page.", "No %s %s.", what, name)
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
