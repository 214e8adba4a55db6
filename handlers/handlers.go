// Package handlers is the portal's HTTP layer: pages, the /api/vdi JSON API,
// sign-in and the console websockets. Every handler returns an error that
// one place turns into a page or a JSON body.
package handlers

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Desktops is what the handlers need of the claim service.
type Desktops interface {
	Pools(ctx context.Context, id vdi.Identity) ([]vdi.PoolStatus, error)
	PoolNamespaces(ctx context.Context, name string) ([]string, error)
	// Claim answers once the claimed desktop runs (the agent seat's
	// claim); ClaimStarting once the claim is won and its desktop asked
	// to start (the pages and the API: the console page waits for a
	// desktop still starting).
	Claim(ctx context.Context, id vdi.Identity, namespace, pool string) (vdi.Desktop, error)
	ClaimStarting(ctx context.Context, id vdi.Identity, namespace, pool string) (vdi.Desktop, error)
	Desktops(ctx context.Context, id vdi.Identity, all bool) ([]vdi.Desktop, error)
	Desktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, error)
	Release(ctx context.Context, id vdi.Identity, ref vdi.Ref, reason string) error
	Start(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	StartFresh(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	Stop(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	Authorize(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error)
	Screenshot(ctx context.Context, ref vdi.Ref) ([]byte, error)
	TrackConsole(ref vdi.Ref, cancel context.CancelCauseFunc) (untrack func())
	ConsoleOpened(ctx context.Context, ref vdi.Ref) error
	ConsoleClosed(ctx context.Context, ref vdi.Ref) error
	ConsoleHeartbeat(ctx context.Context, ref vdi.Ref) error
	Input(ctx context.Context, ref vdi.Ref, at time.Time) error
	MarkAgent(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	NotePersonInput(ctx context.Context, ref vdi.Ref, login string, at time.Time) error
	OverseeAgent(ctx context.Context, id vdi.Identity, ref vdi.Ref, action string) (vdi.Desktop, error)
	NoteAgentRevoked(ctx context.Context, ref vdi.Ref, token string) error
	MayPlayRecording(ctx context.Context, id vdi.Identity, login string, ref vdi.Ref) error
	Share(ctx context.Context, id vdi.Identity, ref vdi.Ref, req vdi.ShareRequest) (vdi.Share, error)
	Shares(ctx context.Context, id vdi.Identity, ref vdi.Ref) ([]vdi.Share, error)
	Unshare(ctx context.Context, id vdi.Identity, ref vdi.Ref, shareID string) (vdi.Share, error)
	SetShareControl(ctx context.Context, id vdi.Identity, ref vdi.Ref, shareID string, control bool) (vdi.Share, error)
	SharedDesktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, vdi.Share, error)
	SharedWithMe(ctx context.Context, id vdi.Identity) ([]vdi.SharedWith, error)
	ClaimChanged(ref vdi.Ref) <-chan struct{}
	TakeConsole(ctx context.Context, ref vdi.Ref, p vdi.Protocol, id string) (string, error)
	NewestConsole(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (string, error)
}

// Identifier tells who made a request and runs the cookie sign-in.
type Identifier interface {
	Identify(r *http.Request) (vdi.Identity, bool)
	DevSignIn() bool
	SignIn(w http.ResponseWriter, r *http.Request, login string) error
	SignOut(w http.ResponseWriter, r *http.Request) error
	EndSessions(ctx context.Context, by vdi.Identity, login string) error
	// SignedOutSince reports whether login signed out, or had their
	// sessions ended, after t (true when that cannot be read).
	SignedOutSince(ctx context.Context, login string, t time.Time) bool
}

// Recordings keeps console recordings (package recording).
type Recordings interface {
	Start(ctx context.Context, sid, login string, ref vdi.Ref, p vdi.Protocol, input bool) (*recording.Session, error)
	List(ctx context.Context, f vdi.RecordingFilter) ([]vdi.Recording, error)
	Get(ctx context.Context, id string) (vdi.Recording, error)
	Open(ctx context.Context, by vdi.Identity, id, action, detail string) (vdi.Recording, *os.File, error)
	Watched(ctx context.Context, by vdi.Identity, r vdi.Recording, action, detail string) error
	Recorded(ctx context.Context, ids []string) (map[string]bool, error)
	// Used returns the bytes all recordings take and their cap (negative:
	// none).
	Used() (used, max int64)
	// UserShare returns each user's share of the cap (negative: none).
	UserShare() int64
	// Delete removes a recording for an admin, audited.
	Delete(ctx context.Context, by vdi.Identity, id string) error
}

// Assets maps static paths to hashed URLs and serves them.
type Assets interface {
	URL(path string) string
	// Modules returns the URLs of an ES module and of what it imports.
	Modules(path string) []string
	Handler() http.Handler
}

// Config configures the handlers.
type Config struct {
	Desktops Desktops
	// Takes runs claims other replicas forward to this one (vdi's
	// claims by shard); nil refuses them.
	Takes    Taker
	Auth     Identifier
	Sessions console.History
	Assets   Assets
	// Recordings records the consoles of recorded pools; without it such
	// consoles are refused.
	Recordings Recordings
	// Admin and History serve the admin dashboard, pool admin and history.
	Admin   Admin
	History History
	// Usage reads the pools' samples for the usage charts; nil shows
	// none. SampleEvery is how often replicas sample (shown there).
	Usage       Usage
	SampleEvery time.Duration
	Log         *slog.Logger
	// Loopback is set when the portal listens on loopback only; the
	// sign-in-by-name page is refused otherwise.
	Loopback bool
	// Ready reports whether the portal can serve (for /readyz).
	Ready func(ctx context.Context) error
	// Notice, when it returns text, is a degraded part of the portal
	// (the history database not answering), shown on /readyz and the
	// dashboard.
	Notice func() string
	// Outage, when it returns text, is a part of the portal that does not
	// answer, which every page says (the Kubernetes API server).
	Outage func() string
	// Cluster says the backend is Kubernetes: a new pool names its
	// namespace and golden source, and Windows licences apply. The local
	// backend's dashboard asks for neither.
	Cluster bool
	// Console configures console connections: relay paths, peers.
	Console ConsoleConfig
	// Listen is the listen address; its host is an allowed Host.
	Listen string
	// PublicURLs are the origins the portal is reached at through proxies
	// (CORRAL_VDI_PUBLIC_URL, plus the OIDC redirect URL's origin); every
	// other Host but loopback and the listen address gets 421.
	PublicURLs []string
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// MetricsClosed, when set and MetricsToken is not, closes /metrics to
	// every request; it is the refusal's hint (how to set the token).
	MetricsClosed string
	// MaxConsolesPerUser caps one user's open consoles (0: 10, <0: none).
	MaxConsolesPerUser int
	// MaxAgentDesktops caps the desktops one user's agents work in at
	// once (0: none).
	MaxAgentDesktops int
	// AgentSeatIdle is how long an agent's screen of a desktop, which
	// counts as a console, stays open after its last call (0: 5 min).
	AgentSeatIdle time.Duration
	// Replica names this replica where several share a cluster; the
	// history page says its history is this replica's own. Empty: one
	// portal.
	Replica string
	// RateLimit limits each user's mutating requests; zero picks the
	// defaults.
	RateLimit RateLimit
	// USB connects /ws/usbredir to VMs; nil refuses USB redirection.
	USB USBRedirector
	// Audit records USB attach and detach and file transfers; nil
	// records nothing.
	Audit Auditor
	// AuditRoom, when it returns an error, is the audit log unable to
	// keep one more admin row (the history database does not answer and
	// its buffer is full of them): admins' changes are refused with it
	// rather than done unrecorded. Nil: always room.
	AuditRoom func() error
	// Files is the Files panel's way into desktops.
	Files FilesConfig
	// Audio carries desktops' sound; nil: no sound.
	Audio Audio
	// ClipImages carries pictures on desktops' clipboards; nil: text only.
	ClipImages ClipImages
	// Tokens keeps personal access tokens; nil: none are made.
	Tokens Tokens
	// Settings keeps each user's console settings; nil: the browser
	// remembers them alone.
	Settings Settings
}

// Handler serves the portal. It keeps the consoles (their websockets,
// sessions and the console page); every other group of routes is a part
// of its own (parts.go), wired in routes.go.
type Handler struct {
	*guard
	desktops   Desktops
	recordings Recordings
	console    *consoleState
	consoles   *consoleCount
	metrics    *metrics
	hosts      *hostCheck
	// checkOrigin is hosts.checkOrigin, for the console websockets.
	checkOrigin func(r *http.Request) bool
	mux         *http.ServeMux
	protected   http.Handler // mux behind cross-origin protection

	probes     *probes
	fallback   *fallback
	signIn     *signIn
	mine       *userDesktops
	kiosk      *kioskPages
	admin      *adminPages
	pools      *poolAdmin
	history    *historyPages
	usage      *usagePages
	recorded   *recordingRoutes
	files      *fileRoutes
	clipImages *clipImageRoutes
	usb        *usbRoutes
	audio      *audioRoutes
	peer       *peerSocket
	shares     *shareRoutes
	tokens     *tokenRoutes
	settings   *settingsRoutes
	mcp        *mcpRoute
	metricsTok string
	metricsOff string
	trail      auditTrail
}

// New returns the portal's handler with every route registered.
func New(cfg Config) *Handler {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	ready, notice := cfg.Ready, cfg.Notice
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	if notice == nil {
		notice = func() string { return "" }
	}
	rd := &renderer{log: log, assets: cfg.Assets, outage: cfg.Outage}
	g := &guard{renderer: rd, auth: cfg.Auth, limits: newUserLimits(cfg.RateLimit), auditRoom: cfg.AuditRoom}
	cs := newConsoleState(cfg.Console)
	cs.tokens = console.NewRDPTokens(cfg.Console.TokenKeys, log)
	cs.hubs.Log = log // why a shared screen's client ended, when not a plain close
	cs.hubs.H264 = cfg.Console.H264
	cs.shared = console.NewStreams(&cs.streams, cfg.Console.Owners, cfg.Console.PeerSecret, log)
	cs.screens = console.NewScreens(console.ScreensConfig{Hubs: &cs.hubs, Owners: cfg.Console.Owners, PeerSecret: cfg.Console.PeerSecret, Log: log})
	cs.dial = console.New(console.Config{Direct: cfg.Desktops, Peers: cfg.Console.Peers, FindPeers: cfg.Console.FindPeers, PeerSecret: cfg.Console.PeerSecret,
		Paths: cfg.Console.Paths, DirectTimeout: cfg.Console.DirectTimeout, Log: log})
	hc := &hostCheck{renderer: rd, hosts: newHostPolicy(cfg.Listen, cfg.PublicURLs)}
	m := newMetrics(metricsConfig{desktops: cfg.Desktops, admin: cfg.Admin, recordings: cfg.Recordings, ready: ready, outage: cfg.Outage})
	if cfg.Desktops != nil {
		cfg.Desktops = countedDesktops{inner: cfg.Desktops, m: m}
	}
	trail := auditTrail{auditor: cfg.Audit, log: log}
	h := &Handler{
		guard:       g,
		desktops:    cfg.Desktops,
		recordings:  cfg.Recordings,
		console:     cs,
		consoles:    newConsoleCount(cfg.MaxConsolesPerUser),
		metrics:     m,
		hosts:       hc,
		checkOrigin: hc.checkOrigin,
		mux:         http.NewServeMux(),
		metricsTok:  cfg.MetricsToken,
		metricsOff:  cfg.MetricsClosed,
		trail:       trail,

		probes:   &probes{log: log, ready: ready, notice: notice},
		fallback: &fallback{renderer: rd, auth: cfg.Auth},
		signIn:   &signIn{renderer: rd, auth: cfg.Auth, loopback: cfg.Loopback},
		mine:     &userDesktops{renderer: rd, desktops: cfg.Desktops, console: cs},
		kiosk:    &kioskPages{renderer: rd, desktops: cfg.Desktops, console: cs},
		pools:    &poolAdmin{admin: cfg.Admin, desktops: cfg.Desktops},
		history: &historyPages{renderer: rd, admin: cfg.Admin, history: cfg.History, recordings: cfg.Recordings,
			desktops: cfg.Desktops, replica: cfg.Replica},
		usage:      &usagePages{renderer: rd, desktops: cfg.Desktops, usage: cfg.Usage, every: cfg.SampleEvery, now: time.Now},
		recorded:   &recordingRoutes{renderer: rd, desktops: cfg.Desktops, recordings: cfg.Recordings},
		files:      &fileRoutes{auditTrail: trail, desktops: cfg.Desktops, files: cfg.Files},
		clipImages: newClipImageRoutes(trail, cfg.Desktops, cfg.ClipImages),
		audio:      &audioRoutes{auditTrail: trail, desktops: cfg.Desktops, audio: cfg.Audio, console: cs, checkOrigin: hc.checkOrigin},
		shares:     &shareRoutes{renderer: rd, desktops: cfg.Desktops, console: cs},
		tokens:     &tokenRoutes{renderer: rd, tokens: cfg.Tokens, desktops: cfg.Desktops},
		settings:   &settingsRoutes{auditTrail: trail, settings: cfg.Settings},
		mcp:        newMCPRoute(rd, cfg, cs),
		peer:       &peerSocket{renderer: rd, auth: cfg.Auth, desktops: cfg.Desktops, console: cs, checkOrigin: hc.checkOrigin, takes: cfg.Takes},
	}
	cs.sessions = console.NewSessions(console.SessionsConfig{Claims: cfg.Desktops, History: cfg.Sessions, Count: m.consoleOpened,
		PersonInput: h.mcp.seat.PersonInput, Log: log})
	h.admin = &adminPages{renderer: rd, admin: cfg.Admin, desktops: cfg.Desktops, history: cfg.History, auth: cfg.Auth,
		console: cs, cluster: cfg.Cluster, notice: notice, desktopGet: h.mine.handleDesktopGet}
	h.usb = &usbRoutes{guard: g, auditTrail: trail, desktops: cfg.Desktops, console: cs, consoles: h.consoles, usb: cfg.USB,
		publicURLs: cfg.PublicURLs, checkOrigin: hc.checkOrigin}
	h.routes()
	return h
}

// filesProps, audioProps and usbHint are the console page's panels, from
// the parts that serve them.
func (h *Handler) filesProps(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.FilesProps {
	return h.files.filesProps(r, id, d)
}

func (h *Handler) audioProps(r *http.Request, d vdi.Desktop) *views.AudioProps {
	return h.audio.audioProps(r, d)
}

func (h *Handler) usbHint(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.USBHint {
	return h.usb.usbHint(r, id, d)
}

// ServeHTTP serves r with security headers, the Host allow-list, Origin
// checks and cross-origin protection.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if h.hosts.hosts.servedOverHTTPS(r) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
	}
	if h.hosts.guardHost(w, r) {
		return
	}
	h.protected.ServeHTTP(w, r)
}
