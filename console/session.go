package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Pipe relays one console connection until it ends.
type Pipe func(ctx context.Context, opts relay.Options) (relay.Stats, error)

// History records console sessions (the history store).
type History interface {
	OpenSession(ctx context.Context, s vdi.Session) error
	CloseSession(ctx context.Context, id string, bytesIn, bytesOut int64, reason string, lastInput time.Time) error
}

// SessionClaims is what Sessions keeps on the claims and reads of them
// (vdi.Service): a console's life on its claim (Claims), the holder's
// newest console (TakeConsole, KeepNewest) and an invitee's invitation
// (KeepShared).
type SessionClaims interface {
	Claims
	NewestReader
	ShareChecker
	TakeConsole(ctx context.Context, ref vdi.Ref, p vdi.Protocol, id string) (string, error)
}

// SessionsConfig configures Sessions.
type SessionsConfig struct {
	// Claims keeps the holder's open consoles on their claims and ends
	// consoles that the claim no longer allows.
	Claims SessionClaims
	// History records each session.
	History History
	// Count counts a console of p by path open until the returned func
	// is called with what it relayed; nil counts nothing.
	Count func(p vdi.Protocol, path string) (closed func(relay.Stats))
	// PersonInput is told each real input of a person (not an agent's
	// token) at a console of ref: it takes control from an agent. Nil:
	// nobody is told.
	PersonInput func(ref vdi.Ref, login string)
	Log         *slog.Logger
}

// Sessions runs console sessions on this replica: every console
// protocol's websocket goes through Run once it has upgraded, an agent's
// screen through HoldAgent and a desktop's sound through Listen. It keeps
// what ends a console besides its client (the holder's newer console, an
// invitation's end, the holder taking back control, a release) and who
// sees it (Watchers, the console page's path chip).
type Sessions struct {
	cfg       SessionsConfig
	takeover  Takeover
	invited   Invitees
	yielding  Invitees // admins' own serial consoles, by yieldKey: a holder's comes first
	watchers  Watchers
	links     links
	listeners listeners
}

// Session is one console session as its handler hands it over,
// authorized and upgraded.
type Session struct {
	// ID names it (NewID): its history row, its recording, its place
	// among the holder's newest consoles on the claim.
	ID       string
	User     vdi.Identity
	Ref      vdi.Ref
	Protocol vdi.Protocol
	// Path is the relay path its connection took (PathDirect, …).
	Path string
	// Holder is the desktop's holder when the console was authorized:
	// the holder's VNC and serial consoles take over from their older
	// ones.
	Holder string
	// Share is the invitation it opened on (nil: the holder's or an
	// admin's): it ends with the invitation, on whichever replica that
	// ends.
	Share *vdi.Share
	// Watcher lists it among the desktop's watchers, for anyone but the
	// holder (an admin, an invitee); nil for the holder's own, whose
	// path the console page's chip shows.
	Watcher *api.Viewer
	// Granted says it has the control the holder gave an admin (a
	// grant): the holder takes it back by ending it, and the admin's
	// page reopens watching.
	Granted bool
	// TakenOver says Sessions.TakeOver took over from the holder's older
	// console (or, an admin's own serial console, listed it to give way
	// to a holder's) before this one dialed: Run does not again.
	TakenOver bool
	// Screen is 0 for a console's own window, 2 or 3 for a screen window
	// the holder's VNC console opened (another part of the same
	// desktop), which joins beside that console, never taking it over.
	Screen int
}

// NewSessions returns Sessions as cfg says.
func NewSessions(cfg SessionsConfig) *Sessions {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Count == nil {
		cfg.Count = func(vdi.Protocol, string) func(relay.Stats) { return func(relay.Stats) {} }
	}
	if cfg.PersonInput == nil {
		cfg.PersonInput = func(vdi.Ref, string) {}
	}
	return &Sessions{cfg: cfg}
}

// Run runs pipe as session c. The session is recorded in the history;
// the holder's own consoles are held open on the claim (Hold: its
// open-console count, heartbeat and last real input, read from the
// protocol stream by relay's detectors); releasing or reclaiming the
// desktop ends the session with a reason the client shows, and so do
// the other ends Session names (enter).
func (s *Sessions) Run(ctx context.Context, c Session, pipe Pipe) {
	ctx, leave := s.enter(ctx, c)
	defer leave()
	id, ref, p, path := c.User, c.Ref, c.Protocol, c.Path
	ses := vdi.Session{ID: c.ID, Login: id.Login, Namespace: ref.Namespace, Member: ref.Name, Protocol: string(p), Path: path}
	if err := s.cfg.History.OpenSession(ctx, ses); err != nil {
		s.cfg.Log.Error("record session", "err", err)
	}
	log := s.cfg.Log.With("session", ses.ID, "desktop", ref, "user", id.Login, "protocol", p, "path", path)
	log.Info("console opened")
	counted := s.cfg.Count(p, path)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	untrack := s.cfg.Claims.TrackConsole(ref, cancel)
	defer untrack()
	// Only the holder's consoles keep the claim alive: an admin watching or
	// helping does not hold off the holder's disconnect grace or idle.
	var lastInput atomic.Int64 // unix nanoseconds
	var held *Held
	if d, err := s.cfg.Claims.Desktop(ctx, id, ref); err == nil && d.Holder == id.Login {
		held = Hold(ctx, s.cfg.Claims, ref, &lastInput, log)
	}

	detector := relay.NewInputDetector(string(p))
	person := id.Token == nil // a person's input takes control from an agent
	stats, err := pipe(ctx, relay.Options{OnInput: func(b []byte) {
		if detector.Feed(b) {
			lastInput.Store(time.Now().UnixNano())
			if person {
				s.cfg.PersonInput(ref, id.Login)
			}
		}
	}})
	cancel(nil)

	reason := "closed"
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error() // released or reclaimed
	} else if err != nil {
		reason = err.Error()
	}
	if held != nil {
		held.Close()
	}
	counted(stats)
	var input time.Time
	if n := lastInput.Load(); n != 0 {
		input = time.Unix(0, n)
	}
	if err := s.cfg.History.CloseSession(context.WithoutCancel(ctx), ses.ID, stats.BytesIn, stats.BytesOut, reason, input); err != nil {
		log.Error("record session", "err", err)
	}
	log.Info("console closed", "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut, "reason", reason)
}

// NewID returns a new random ID: a console session's, a watch's.
func NewID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
