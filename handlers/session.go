package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// inputFlushEvery is how often a session reports new user input to the
// claim; idle reclaim is at most this late.
const inputFlushEvery = 5 * time.Second

// pipeFunc relays one console connection until it ends.
type pipeFunc func(ctx context.Context, opts relay.Options) (relay.Stats, error)

// runSession runs pipe as session sid of id on ref. Every console protocol's
// websocket handler goes through here once it has upgraded. The session is
// recorded in the history; for the holder's own consoles the claim's
// open-console count, heartbeat and last real input (read from the protocol
// stream by relay's detectors) are kept in its Lease; releasing or
// reclaiming the desktop ends the session with a reason the client shows.
func (h *Handler) runSession(ctx context.Context, sid string, id vdi.Identity, ref vdi.Ref, p vdi.Protocol, path string, pipe pipeFunc) {
	s := vdi.Session{ID: sid, Login: id.Login, Namespace: ref.Namespace, Member: ref.Name, Protocol: string(p), Path: path}
	if err := h.sessions.OpenSession(ctx, s); err != nil {
		h.log.Error("record session", "err", err)
	}
	log := h.log.With("session", s.ID, "desktop", ref, "user", id.Login, "protocol", p, "path", path)
	log.Info("console opened")
	open := h.metrics.consoles.WithLabelValues(string(p), path)
	open.Inc()
	defer open.Dec()
	h.metrics.sessions.WithLabelValues(string(p), path).Inc()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	untrack := h.desktops.TrackConsole(ref, cancel)
	defer untrack()
	// Only the holder's consoles keep the claim alive: an admin watching or
	// helping does not hold off the holder's disconnect grace or idle.
	d, err := h.desktops.Desktop(ctx, id, ref)
	holder := err == nil && d.Holder == id.Login
	if holder {
		if err := h.desktops.ConsoleOpened(ctx, ref); err != nil {
			log.Warn("record open console on claim", "err", err)
		}
	}

	var lastInput atomic.Int64 // unix nanoseconds
	detector := relay.NewInputDetector(string(p))
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if holder {
			h.watchSession(ctx, ref, &lastInput, log)
		}
	}()
	person := id.Token == nil // a person's input takes control from an agent
	stats, err := pipe(ctx, relay.Options{OnInput: func(b []byte) {
		if detector.Feed(b) {
			lastInput.Store(time.Now().UnixNano())
			if person {
				h.mcp.seat.PersonInput(ref, id.Login)
			}
		}
	}})
	cancel(nil)
	<-watchDone

	reason := "closed"
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		reason = cause.Error() // released or reclaimed
	} else if err != nil {
		reason = err.Error()
	}
	done := context.WithoutCancel(ctx)
	if holder {
		if err := h.desktops.ConsoleClosed(done, ref); err != nil {
			log.Warn("record closed console on claim", "err", err)
		}
	}
	h.metrics.bytes.WithLabelValues("in").Add(float64(stats.BytesIn))
	h.metrics.bytes.WithLabelValues("out").Add(float64(stats.BytesOut))
	var input time.Time
	if n := lastInput.Load(); n != 0 {
		input = time.Unix(0, n)
	}
	if err := h.sessions.CloseSession(done, s.ID, stats.BytesIn, stats.BytesOut, reason, input); err != nil {
		log.Error("record session", "err", err)
	}
	log.Info("console closed", "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut, "reason", reason)
}

// watchSession reports new input to the claim every inputFlushEvery and
// confirms the open console every vdi.HeartbeatEvery, until ctx ends.
func (h *Handler) watchSession(ctx context.Context, ref vdi.Ref, lastInput *atomic.Int64, log interface {
	Warn(msg string, args ...any)
}) {
	t := time.NewTicker(inputFlushEvery)
	defer t.Stop()
	var flushed int64
	beat := time.Now()
	for {
		select {
		case <-ctx.Done():
			if n := lastInput.Load(); n != flushed {
				h.desktops.Input(context.WithoutCancel(ctx), ref, time.Unix(0, n))
			}
			return
		case now := <-t.C:
			if n := lastInput.Load(); n != flushed {
				if err := h.desktops.Input(ctx, ref, time.Unix(0, n)); err != nil {
					log.Warn("record input on claim", "err", err)
				}
				flushed = n
			}
			if now.Sub(beat) >= vdi.HeartbeatEvery {
				if err := h.desktops.ConsoleHeartbeat(ctx, ref); err != nil {
					log.Warn("confirm open console on claim", "err", err)
				}
				beat = now
			}
		}
	}
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
