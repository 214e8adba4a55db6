package console

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// An admin's own serial console of a desktop nobody holds holds the line
// as a holder's does (Streams.Open records it). A line takes one client,
// so when someone claims the desktop and opens its serial console the
// admin's gives way first: it ends with HolderCame on this replica at
// once (Sessions.TakeOver) and, watching the claim, on every other
// (keepYielding); the holder's console then dials once it has let go of
// the line, and the admin's page opens again beside the holder, watching
// theirs, view only.

// HolderCame is the cause an admin's own serial console ends with when
// holder (empty: not known) claimed the desktop and opened theirs.
func HolderCame(holder string) ShareEnded {
	if holder == "" {
		holder = "Someone"
	}
	return ShareEnded(RoleChangedPrefix + holder + " claimed this desktop and opened its serial console, which takes one client: you watch it now, view only.")
}

// yields reports whether console c gives way to a holder's serial
// console: an admin's own, of a desktop nobody held when it opened.
func yields(c Session) bool {
	return c.Protocol == vdi.ProtocolSerial && c.Holder == "" && c.Share == nil
}

// yieldKey is the key of ref's yielding consoles in Sessions.yielding.
func yieldKey(ref vdi.Ref) string { return "yield:" + ref.String() }

// yield has c, the admin's own serial console that cancel ends, give way
// to a holder's from now on: at once on this replica (Sessions.TakeOver
// ends it), and as the claim names one on any. Call the returned func
// when c has closed.
func (s *Sessions) yield(ctx context.Context, c Session, cancel context.CancelCauseFunc) (remove func()) {
	remove = s.yielding.Add(yieldKey(c.Ref), cancel)
	go keepYielding(ctx, s.cfg.Claims, c.User, c.Ref, cancel)
	return remove
}

// keepYielding ends the admin's own serial console of ref (cancel) once
// the claim names a serial console of a holder, on any replica, until
// ctx ends. A claim store that reports no changes (one replica) is read
// once (a holder's console recorded before this one was listed), then
// leaves it to TakeOver.
func keepYielding(ctx context.Context, claims SessionClaims, id vdi.Identity, ref vdi.Ref, cancel context.CancelCauseFunc) {
	for {
		changed := claims.ClaimChanged(ref) // before the read: a change during it wakes the wait
		newest, err := claims.NewestConsole(ctx, ref, vdi.ProtocolSerial)
		if ctx.Err() != nil {
			return
		}
		if err == nil && newest != "" {
			var holder string
			if d, err := claims.Desktop(ctx, id, ref); err == nil {
				holder = d.Holder
			}
			cancel(HolderCame(holder))
			return
		}
		if changed == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
