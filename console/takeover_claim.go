package console

import (
	"context"
	"log/slog"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The holder's newest VNC or serial console takes over from older ones
// on every replica, as Takeover does on one: it is recorded on the claim
// (vdi.Service.TakeConsole), and each older console, wherever it runs,
// ends with ErrTakenOver as soon as its replica sees the claim change
// (the page then offers "Use it here").

// NewestReader is what KeepNewest reads of the claim service.
type NewestReader interface {
	NewestConsole(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (string, error)
	ClaimChanged(ref vdi.Ref) <-chan struct{}
}

// KeepNewest ends the holder's console stamped stamp (vdi.Service.TakeConsole) of p
// (cancel) once the claim names a newer one of theirs, until ctx ends;
// call it once stamp is recorded (the claim then names it or a newer
// one). A claim store that reports no changes (one replica) leaves
// it to Takeover.
func KeepNewest(ctx context.Context, claims NewestReader, ref vdi.Ref, p vdi.Protocol, stamp string, cancel context.CancelCauseFunc, log *slog.Logger) {
	for {
		changed := claims.ClaimChanged(ref) // before the read: a change during it wakes the wait
		if changed == nil {
			return
		}
		newest, err := claims.NewestConsole(ctx, ref, p)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("the holder's newest console not read; this one stays", "desktop", ref, "protocol", p, "err", err)
		case vdi.NewerConsole(newest, stamp):
			cancel(ErrTakenOver)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
