package handlers

import (
	"context"
	"log/slog"
	"net/http"
)

// The handler's parts: each group of routes is a small type of its own
// holding only what it uses, built by New and wired in routes.go. Handler
// keeps the consoles (their websockets, sessions and the console page)
// and the shared error mapping it embeds.

// renderer writes pages and errors: the one place an error becomes a
// status, a message and a hint (errors.go), and templ components pages.
type renderer struct {
	log    *slog.Logger
	assets Assets
	outage func() string
}

// guard wraps handlers of signed-in users: identity, rate limits, the
// audit log's room for admins' changes, and the error mapping (errors.go).
type guard struct {
	*renderer
	auth      Identifier
	limits    *userLimits
	auditRoom func() error
}

// probes serves /healthz and /readyz (health.go).
type probes struct {
	log      *slog.Logger
	ready    func(ctx context.Context) error
	readyLog readyLog
	notice   func() string
}

// fallback answers what no route matches, and the favicon (notfound.go).
type fallback struct {
	*renderer
	auth Identifier
}

// signIn serves sign-in by name, sign-out and the OIDC flow (signin.go,
// auth_oidc.go).
type signIn struct {
	*renderer
	auth     Identifier
	loopback bool
}

// hostCheck enforces the Host allow-list and Origin checks (hosts.go).
type hostCheck struct {
	*renderer
	hosts *hostPolicy
}

// userDesktops serves a user's pools and desktops: the home page and its
// forms, and /api/vdi/pools and /api/vdi/desktops (home.go, pools_api.go,
// desktops_api.go, link.go).
type userDesktops struct {
	*renderer
	desktops Desktops
	console  *consoleState
}

// kioskPages serves /kiosk/{pool} (kiosk.go).
type kioskPages struct {
	*renderer
	desktops Desktops
	console  *consoleState
}

// adminPages serves the pool dashboard, its desktop actions and signing
// users out everywhere (admin.go, admin_actions.go, end_sessions.go).
type adminPages struct {
	*renderer
	admin    Admin
	desktops Desktops
	history  History
	auth     Identifier
	console  *consoleState
	thumbs   thumbs
	cluster  bool
	notice   func() string
	// desktopGet answers a desktop's JSON, as GET /api/vdi/desktops/… does.
	desktopGet handlerFunc
}

// poolAdmin serves creating, changing and deleting pools (pools_admin.go).
type poolAdmin struct {
	admin    Admin
	desktops Desktops
}

// historyPages serves session history and the audit log, the admin's and
// a user's own (history.go, my_history.go).
type historyPages struct {
	*renderer
	admin      Admin
	history    History
	recordings Recordings
	desktops   Desktops
	replica    string
}

// recordingRoutes serves recordings: lists, playback, files and deletion
// (recordings.go, recordings_delete.go).
type recordingRoutes struct {
	*renderer
	desktops   Desktops
	recordings Recordings
}

// auditTrail records what consoles move in and out of desktops.
type auditTrail struct {
	auditor Auditor
	log     *slog.Logger
}

// fileRoutes serves the Files panel (files.go).
type fileRoutes struct {
	auditTrail
	desktops Desktops
	files    FilesConfig
}

// usbRoutes serves USB redirection: its socket, its tokens and the
// console page's hint (usbredir*.go).
type usbRoutes struct {
	*guard
	auditTrail
	desktops   Desktops
	console    *consoleState
	consoles   *consoleCount
	usb        USBRedirector
	usbStreams usbStreams
	publicURLs []string
	// checkOrigin is the console's (hosts.go).
	checkOrigin func(r *http.Request) bool
}

// audioRoutes serves desktops' sound (audio.go).
type audioRoutes struct {
	auditTrail
	desktops    Desktops
	audio       Audio
	console     *consoleState // who watches: sound follows the console's watching decision
	checkOrigin func(r *http.Request) bool
}

// peerSocket serves other portals' console links (peer.go).
type peerSocket struct {
	*renderer
	auth        Identifier
	desktops    Desktops
	console     *consoleState
	checkOrigin func(r *http.Request) bool
	takes       Taker // nil: this replica holds no claim shards
}
