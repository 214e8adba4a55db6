package console

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Claims is what a console's lifecycle keeps on its desktop's claim
// (vdi.Service): whether the user holds it, the consoles open on it,
// their heartbeats and last input, and the consoles a release or
// reclaim ends on this replica.
type Claims interface {
	Desktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, error)
	TrackConsole(ref vdi.Ref, cancel context.CancelCauseFunc) (untrack func())
	ConsoleOpened(ctx context.Context, ref vdi.Ref) error
	ConsoleClosed(ctx context.Context, ref vdi.Ref) error
	ConsoleHeartbeat(ctx context.Context, ref vdi.Ref) error
	Input(ctx context.Context, ref vdi.Ref, at time.Time) error
}

// inputFlushEvery is how often a held console reports new input to the
// claim; idle reclaim is at most this late.
var inputFlushEvery = 5 * time.Second

// heartbeatEvery is how often a held console confirms itself on the
// claim (vdi.HeartbeatEvery; a test's shorter).
var heartbeatEvery = vdi.HeartbeatEvery

// Held is a console counted open on its desktop's claim, which holds off
// the disconnect grace while it lasts: recorded opened, confirmed every
// vdi.HeartbeatEvery (after three missed beats it counts as closed),
// its last input reported, and recorded closed. Every console that keeps
// a claim alive is held so: the holder's (Sessions.Run) and an agent's
// screen (Sessions.HoldAgent).
type Held struct {
	claims Claims
	ref    vdi.Ref
	log    *slog.Logger
	ctx    context.Context
	stop   context.CancelFunc
	done   chan struct{}
}

// Hold records a console of ref opened on its claim and keeps it so
// until Close or ctx's end: it confirms it every vdi.HeartbeatEvery and,
// when input is not nil, reports the newest input it holds (unix
// nanoseconds) every few seconds.
func Hold(ctx context.Context, claims Claims, ref vdi.Ref, input *atomic.Int64, log *slog.Logger) *Held {
	if err := claims.ConsoleOpened(ctx, ref); err != nil {
		log.Warn("record open console on claim", "err", err)
	}
	h := &Held{claims: claims, ref: ref, log: log, done: make(chan struct{})}
	h.ctx, h.stop = context.WithCancel(ctx)
	if input == nil {
		input = new(atomic.Int64) // none ever comes
	}
	go func() {
		defer close(h.done)
		h.keep(input)
	}()
	return h
}

// keep reports new input to the claim every inputFlushEvery and confirms
// the open console every heartbeatEvery, until h.ctx ends.
func (h *Held) keep(lastInput *atomic.Int64) {
	t := time.NewTicker(min(inputFlushEvery, heartbeatEvery))
	defer t.Stop()
	var flushed int64
	beat := time.Now()
	for {
		select {
		case <-h.ctx.Done():
			if n := lastInput.Load(); n != flushed {
				h.claims.Input(context.WithoutCancel(h.ctx), h.ref, time.Unix(0, n))
			}
			return
		case now := <-t.C:
			if n := lastInput.Load(); n != flushed {
				if err := h.claims.Input(h.ctx, h.ref, time.Unix(0, n)); err != nil {
					h.log.Warn("record input on claim", "err", err)
				}
				flushed = n
			}
			if now.Sub(beat) >= heartbeatEvery {
				if err := h.claims.ConsoleHeartbeat(h.ctx, h.ref); err != nil && h.ctx.Err() == nil {
					h.log.Warn("confirm open console on claim", "err", err)
				}
				beat = now
			}
		}
	}
}

// Close stops the heartbeats, reports the last input and records the
// console closed on the claim. Call it once.
func (h *Held) Close() {
	h.stop()
	<-h.done
	if err := h.claims.ConsoleClosed(context.WithoutCancel(h.ctx), h.ref); err != nil {
		h.log.Warn("record closed console on claim", "err", err)
	}
}

// holdConn holds conn, a connection to ref's screen outside any console
// session (an agent's: the agent acts for the holder), open on ref's
// claim until ctx ends or conn closes; end, ctx's cancel, is called when
// conn closes, and by a release or reclaim (which ends the claim's
// consoles on this replica), which closes conn. It returns conn with the
// console recorded closed at its close.
func holdConn(ctx context.Context, end context.CancelCauseFunc, claims Claims, ref vdi.Ref, conn net.Conn, log *slog.Logger) net.Conn {
	untrack := claims.TrackConsole(ref, end)
	held := Hold(ctx, claims, ref, nil, log)
	conn = connid.OnClose(conn, func() {
		end(nil)
		held.Close()
		untrack()
	})
	go func() {
		<-ctx.Done()
		conn.Close() // released, reclaimed or stopped: a no-op once closed
	}()
	return conn
}
