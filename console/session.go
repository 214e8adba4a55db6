package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

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

// SessionsConfig configures Sessions.
type SessionsConfig struct {
	// Claims keeps the holder's open consoles on their claims.
	Claims Claims
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

// Sessions runs console sessions: every console protocol's websocket
// goes through Run once it has upgraded.
type Sessions struct {
	cfg SessionsConfig
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

// Run runs pipe as session sid of id on ref. The session is recorded in
// the history; the holder's own consoles are held open on the claim
// (Hold: its open-console count, heartbeat and last real input, read
// from the protocol stream by relay's detectors); releasing or
// reclaiming the desktop ends the session with a reason the client
// shows.
func (s *Sessions) Run(ctx context.Context, sid string, id vdi.Identity, ref vdi.Ref, p vdi.Protocol, path string, pipe Pipe) {
	ses := vdi.Session{ID: sid, Login: id.Login, Namespace: ref.Namespace, Member: ref.Name, Protocol: string(p), Path: path}
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
