// Package portal wires the corral-vdi-portal server together: Main opens
// the database, starts the backend, and serves HTTP (and the admin socket)
// until its context ends; Serve is the serve command around it and Doctor
// checks a machine or cluster for it. The command and the end-to-end tests
// run the same Main. The admin CLI, its client, is package cli.
package portal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/handlers"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/static"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/tokens"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Main is the running program.
type Main struct {
	Config Config
	Log    *slog.Logger
	// Out is where the start-up banner goes (the URL and how to sign in).
	Out io.Writer

	db      *store.DB
	history *store.Buffer  // history and audit writes, kept while db does not answer
	backend *local.Backend // nil with the kube backend
	sandbox *local.Sandbox // the local desktops' uids; nil when none run
	svc     *vdi.Service
	ln      net.Listener   // the TCP listener of CORRAL_VDI_LISTEN
	unixLns []net.Listener // its unix: sockets, for a proxy on this host
	srv     *http.Server
	admin   *adminSocket // the CLI's socket; nil when off
	// recordings keeps the recordings of recorded pools' sessions.
	recordings *recording.Store

	kube      kubernetes.Interface // the kube backend's client; nil with local
	apiserver apiserverHealth      // whether kube's API server answers, for /readyz and the pages
	stopKube  context.CancelFunc   // ends the kube backend's watches
	caches    kubeCaches           // the kube backend's watch-fed caches, for /readyz and the pages
	identity  string               // this replica in the reclaim leader election
	screens   *kube.ScreenOwners   // who owns each desktop's screen; nil: this portal alone
	leading   atomic.Bool
	notReady  error // why /readyz fails for good; nil when it may pass
	// metricsClosed, when set, closes /metrics: the hint of how to open
	// it (a deployed portal's Secret without metrics-token).
	metricsClosed string
	handler       *handlers.Handler

	// consolePaths are the backend's ways to a console after the direct
	// path and the peers (the kube backend's apiserver subresources).
	consolePaths []console.Path
	// usb reaches VMs' usbredir endpoints: QEMU's chardev locally, the
	// VMI's usbredir subresource on the kube backend.
	usb handlers.USBRedirector
	// files reaches session desktops' homes (the local backend only).
	files handlers.Files
	// clipImages reaches session desktops' clipboard pictures (likewise).
	clipImages handlers.ClipImages
	// audio reaches session desktops' sound (the local backend only).
	audio handlers.Audio
	// closers close what Open opened beside the listeners.
	closers []func() error
}

// URL returns the portal's base URL once Open has returned.
func (m *Main) URL() string { return "http://" + m.ln.Addr().String() }

// Open prepares everything and starts listening, but does not serve yet.
func (m *Main) Open(ctx context.Context) error {
	c := m.Config
	if m.Log == nil {
		m.Log = slog.Default()
	}
	if m.Out == nil {
		m.Out = os.Stdout
	}
	m.checkSharedSecrets()
	if c.Server.Backend != BackendKube {
		if err := local.CheckDesktopDeps(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.Server.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	db, err := openDB(ctx, c, m.Log)
	if err != nil {
		return err
	}
	if err := tightenDataDir(c.Server.DataDir, c.Server.Backend != BackendKube, m.Log); err != nil {
		db.Close()
		return err
	}
	m.db = db
	m.history = store.NewBuffer(db, c.Store.BufferRows, m.Log)
	var backend vdi.Backend
	var leases vdi.Leases = db.Leases()
	if c.Server.Backend == BackendKube {
		if backend, leases, err = m.openKube(ctx); err != nil {
			return err
		}
	} else if backend, err = m.openLocal(ctx); err != nil {
		return err
	}
	m.openScreens()
	var groups vdi.GroupDirectory
	if c.Auth.GroupsFile != "" {
		gf, err := auth.OpenGroupsFile(c.Auth.GroupsFile, m.Log)
		if err != nil {
			return err
		}
		groups = gf
	}
	lockNS := local.Namespace
	if c.Server.Backend == BackendKube {
		lockNS = c.Kube.Namespace
	}
	m.svc = vdi.NewService(vdi.Config{Backend: backend, Leases: leases, Audit: m.history, Log: m.Log,
		Policy: vdi.Policy{DisconnectGrace: c.Claims.DisconnectGrace, MaxSession: c.Claims.MaxSession, IdleTimeout: c.Claims.IdleTimeout,
			Network: vdi.Network(c.Local.DesktopNetwork)},
		MaxDesktopsPerUser: c.Claims.MaxDesktopsPerUser, LockNamespace: lockNS, Groups: groups, Samples: db, RefillDelay: refillDelay(c.Server.Backend),
		Replicas: m.replicas(), Shards: m.claimShards()})
	pats := tokens.New(tokens.Config{Store: db, Audit: m.history, ValidLogin: auth.ValidLogin, Log: m.Log})
	authn, err := auth.New(auth.Config{
		Modes: c.Auth.Modes, TrustedProxies: c.Auth.TrustedProxies, Admins: c.Auth.Admins, AdminGroups: c.Auth.AdminGroups, Audit: m.history, Revocations: m.history, Groups: groups,
		SessionKeys: c.Auth.SessionKeys, KeyFile: filepath.Join(c.Server.DataDir, "cookie.keys"), SessionLifetime: c.Auth.SessionLifetime,
		Secure: strings.HasPrefix(c.Auth.OIDC.RedirectURL, "https://"), OIDC: c.Auth.OIDC, Log: m.Log, Tokens: pats,
	})
	if err != nil {
		return err
	}
	assets, err := static.New()
	if err != nil {
		return err
	}
	if missing := assets.Missing(); len(missing) > 0 {
		m.Log.Error("browser clients missing from this build: run `make assets` and rebuild", "missing", strings.Join(missing, ","))
	}
	m.recordings, err = recording.Open(ctx, recording.Config{Dir: filepath.Join(c.Server.DataDir, "recordings"), DB: db,
		MaxBytes: c.Recording.MaxBytes, UserMaxBytes: c.Recording.UserMaxBytes, Reserve: c.Recording.DiskReserve,
		DBDir: c.Server.DataDir, Retention: c.Recording.Retention, Log: m.Log})
	if err != nil {
		return err
	}
	c.Console.H264 = m.resolveH264(ctx)
	m.Config.Console.H264 = c.Console.H264 // for openWebRTC
	rtcServer, err := m.openWebRTC()
	if err != nil {
		return err
	}
	h := handlers.New(handlers.Config{
		Recordings: m.recordings,
		Desktops:   m.svc, Takes: m.svc, Auth: authn, Sessions: m.history, Assets: assets, Admin: m.svc, History: db, Usage: db, SampleEvery: c.Claims.ReclaimEvery, Log: m.Log,
		Loopback: isLoopback(c.Server.Listen),
		Console: handlers.ConsoleConfig{Peers: c.Console.Peers, PeerSecret: c.Console.PeerSecret, Paths: m.consolePaths, TokenKeys: c.Console.TokenKeys,
			H264: c.Console.H264, RTC: rtcServer, Owners: m.screenOwners(), FindPeers: m.findPeers()},
		Ready:   m.ready,
		Notice:  notices(m.history.StatusText, m.recordings.Notice, m.caches.notice),
		Outage:  m.apiserver.notice,
		Cluster: c.Server.Backend == BackendKube,
		Listen:  c.Server.Listen, PublicURLs: publicOrigins(c), MetricsToken: c.Server.MetricsToken, MetricsClosed: m.metricsClosed, MaxConsolesPerUser: c.Console.MaxConsolesPerUser,
		Replica: replicaName(c, m.identity),
		USB:     m.usb, Audit: m.history, AuditRoom: m.history.AuditRoom,
		Files: handlers.FilesConfig{Files: m.files, MaxFile: c.Uploads.MaxFile, Quota: c.Uploads.Quota}, ClipImages: m.clipImages,
		Audio: m.audio, Tokens: pats, Settings: db, MaxAgentDesktops: c.Claims.MaxAgentDesktops, AgentSeatIdle: c.Claims.AgentSeatIdle,
	})
	m.handler = h
	if err := m.listen(); err != nil {
		return err
	}
	m.advertise()
	// ReadTimeout bounds a whole request, so a trickled body cannot hold a
	// connection; IdleTimeout ends idle keep-alives. Websockets clear the
	// deadlines when they upgrade and keep their own ping-based liveness.
	m.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(m.Log.Handler(), slog.LevelWarn),
		ConnContext:       connContext(m.Log),
	}
	m.admin, err = openAdminSocket(c.Server.AdminSocket, h, m.Log)
	if m.admin != nil {
		m.admin.portalURL = m.URL()
		if o := publicOrigins(c); len(o) > 0 {
			m.admin.portalURL = o[0]
		}
	}
	return err
}

// Run serves until ctx ends, then shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	// Requests outlive ctx while the portal drains: their context ends
	// after the drain, which closes the consoles still open with a reason.
	base, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	m.srv.BaseContext = func(net.Listener) context.Context { return base }
	fmt.Fprintf(m.Out, "corral-vdi-portal is serving on %s\n", m.URL())
	if isLoopback(m.Config.Server.Listen) && contains(m.Config.Auth.Modes, auth.ModeDev) {
		fmt.Fprintf(m.Out, "Open it in a browser on this machine and sign in with any user name.\n")
	}
	errc := make(chan error, 1+len(m.unixLns))
	for _, ln := range append([]net.Listener{m.ln}, m.unixLns...) {
		go func() { errc <- m.srv.Serve(ln) }()
	}
	reclaimerDone := make(chan struct{})
	go func() { defer close(reclaimerDone); m.runReclaimer(ctx) }()
	// The screen heartbeat outlives the drain: this replica's screens stay
	// its own while its consoles may finish.
	screensCtx, stopScreens := context.WithCancel(context.WithoutCancel(ctx))
	defer stopScreens()
	screensDone := make(chan struct{})
	go m.runScreens(screensCtx, screensDone)
	// A replica keeps its claim shards until its requests ended (a
	// claim forwarded to it may still run), then lets them go.
	shardsCtx, stopShards := context.WithCancel(context.WithoutCancel(ctx))
	defer stopShards()
	shardsDone := make(chan struct{})
	go func() { defer close(shardsDone); m.svc.RunShards(shardsCtx) }()
	go m.pruneHistory(ctx)
	go m.svc.RunSampler(ctx, m.Config.Claims.ReclaimEvery)
	go m.history.Run(ctx)
	go m.recordings.Prune(ctx)
	go m.admin.serve(ctx)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	m.drain(ctx)
	endRequests()
	stopShards()
	stopScreens()
	m.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := m.srv.Shutdown(sctx)
	for _, done := range []chan struct{}{reclaimerDone, screensDone, shardsDone} {
		select { // a reclaim leader releases its Lease, and the screen heartbeat goes, so others take over at once
		case <-done:
		case <-sctx.Done():
		}
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// drain, with Config.Server.DrainTimeout set, fails /readyz and refuses new
// consoles, and lets open ones run until they end or the timeout does.
func (m *Main) drain(ctx context.Context) {
	if m.Config.Server.DrainTimeout <= 0 {
		return
	}
	if m.screens != nil {
		m.screens.SetDraining()    // other replicas stop choosing this one as a peer
		m.handler.HandOffScreens() // and take its screens over now, not as it exits
	}
	m.Log.Info("draining: new consoles go to other replicas, open ones may finish", "timeout", m.Config.Server.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.Config.Server.DrainTimeout)
	defer cancel()
	if left := m.handler.Drain(dctx); left > 0 {
		m.Log.Warn("drain timed out: closing the consoles still open", "consoles", left)
	}
}

// Close releases what Open took; desktops keep running unless configured,
// and the host fence stays for as long as they may.
func (m *Main) Close() error {
	if m.backend != nil && m.Config.Local.StopDesktopsOnExit {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m.backend.StopAll(ctx)
		cancel()
		m.stoppedOnExit()
		if err := m.sandbox.UnfenceHost(); err != nil { // no desktop left to fence
			m.Log.Error("remove the host fence", "err", err)
		}
	}
	if m.stopKube != nil {
		m.stopKube()
	}
	if m.ln != nil {
		m.ln.Close()
	}
	for _, ln := range m.unixLns {
		ln.Close()
	}
	m.admin.Close()
	for _, c := range m.closers {
		c()
	}
	if m.db != nil {
		return m.db.Close()
	}
	return nil
}

// openLocal starts the local backend and its demo pools.
func (m *Main) openLocal(ctx context.Context) (vdi.Backend, error) {
	c := m.Config
	hide := append(append([]string{c.Server.DataDir}, c.SecretFiles...), c.Server.ListenUnix...) // a proxy's socket is no desktop's way in
	sandbox, refuse := local.NewSandbox(local.SandboxConfig{Mode: c.Local.DesktopSandbox, UIDs: c.Local.DesktopUIDs, Limits: c.Local.DesktopLimits,
		Hide: hide})
	m.sandbox = sandbox
	var err error
	m.backend, err = local.New(ctx, local.Config{DB: m.db, Dir: filepath.Join(c.Server.DataDir, localDirName), Log: m.Log, VMImage: c.Local.VMImage,
		VMImageCache: c.Local.VMImageCache, VMListenTCP: c.Local.VMListen == "tcp",
		VMAccel: c.Local.VMAccel, KVMDevice: c.Local.KVMDevice, Sandbox: sandbox, Refuse: refuse, Network: c.Local.DesktopNetwork})
	if err != nil {
		return nil, err
	}
	if err := m.stopLeftDesktops(ctx); err != nil {
		return nil, err
	}
	if c.Local.DemoPoolSize > 0 {
		if err := m.backend.EnsureDemoPool(ctx, c.Local.DemoPoolSize); err != nil {
			return nil, err
		}
	}
	if c.Local.DemoVMPoolSize > 0 {
		if err := m.backend.EnsureDemoVMPool(ctx, c.Local.DemoVMPoolSize); err != nil {
			return nil, err
		}
	}
	m.usb = m.backend
	m.files = m.backend
	m.clipImages = m.backend
	m.audio = m.backend
	return m.backend, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pruneHistory bounds the audit log and session history now and hourly.
func (m *Main) pruneHistory(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := m.db.Prune(ctx, m.Config.Store.History); err != nil && ctx.Err() == nil {
			m.Log.Error("prune history", "err", err)
		} else if n > 0 {
			m.Log.Info("pruned history", "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publicOrigins are the origins the handlers allow beyond loopback and the
// listen address: CORRAL_VDI_PUBLIC_URL and the OIDC redirect URL's.
func publicOrigins(c Config) []string {
	out := append([]string{}, c.Server.PublicURLs...)
	if u, err := url.Parse(c.Auth.OIDC.RedirectURL); err == nil && u.Host != "" {
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

// notices joins what each of fns says is degraded, for the dashboard.
func notices(fns ...func() string) func() string {
	return func() string {
		var out []string
		for _, fn := range fns {
			if s := fn(); s != "" {
				out = append(out, s)
			}
		}
		return strings.Join(out, " ")
	}
}
