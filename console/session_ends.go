package console

import (
	"context"
	"slices"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// enter sets up what ends console c besides its client and who sees it,
// for as long as it runs: the holder's VNC or serial console takes over
// from their older one on any replica (Takeover, KeepNewest); an
// invitee's ends with its invitation on any replica (Invitees,
// KeepShared); an admin's with granted control ends when the holder
// takes it back; a watcher is listed for the holder's page, the
// holder's own path shown on the console page's chip. The returned
// context ends with the cause the client is told; call leave when the
// console has closed.
func (s *Sessions) enter(ctx context.Context, c Session) (_ context.Context, leave func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	var undo []func()
	if takesOver(c) && !c.TakenOver {
		undo = append(undo, s.take(ctx, c, cancel))
	}
	if yields(c) && !c.TakenOver { // a holder's serial console comes first
		undo = append(undo, s.yield(ctx, c, cancel))
	}
	if c.Share != nil { // revoked or run out: the console closes
		undo = append(undo, s.invited.Add(c.Share.ID, cancel))
		go KeepShared(ctx, s.cfg.Claims, c.User, c.Ref, *c.Share, vdi.ShareCheckEvery, cancel)
	}
	var end func() // the holder takes back the control they gave
	if c.Granted {
		end = func() {
			cancel(ShareEnded(RoleChangedPrefix + c.Holder + " took back control; you watch, view only."))
		}
	}
	switch {
	case c.Watcher != nil: // the holder's page says so at once
		undo = append(undo, s.watchers.Add(c.Ref, *c.Watcher, end))
	case c.Protocol != vdi.ProtocolUSBRedir && c.Protocol != vdi.ProtocolAudio: // nor a USB stream nor sound a console the chip speaks of
		undo = append(undo, s.links.set(c.Ref, c.Path))
	}
	return ctx, func() {
		for _, u := range slices.Backward(undo) {
			u()
		}
		cancel(nil)
	}
}

// Watchers returns who, other than the holder, has a console of each
// desktop open on this replica.
func (s *Sessions) Watchers() *Watchers { return &s.watchers }

// Invitees returns the open consoles of each invitation on this replica:
// revoking or changing one ends them (Invitees.End).
func (s *Sessions) Invitees() *Invitees { return &s.invited }

// Path returns the relay path of ref's newest console on this replica
// that is not a watcher's (PathDirect, …), or "" while none is open.
func (s *Sessions) Path(ref vdi.Ref) string { return s.links.get(ref) }

// takesOver reports whether console c takes over from its holder's older
// one: QEMU serves one serial client at a time (a second would wait
// unseen) and a KubeVirt VMI one VNC and one serial client; an admin who
// is not the holder watches alongside and is never taken over, nor is a
// screen window of the holder's console.
func takesOver(c Session) bool {
	return (c.Protocol == vdi.ProtocolVNC || c.Protocol == vdi.ProtocolSerial) && c.Holder == c.User.Login && c.Screen == 0
}

// take makes c, which cancel ends, the holder's newest console of its
// protocol: recorded on the claim, which orders it after every console
// recorded before it, on any replica (no clock involved); the older ones
// give way here and, watching the claim, on the other replicas. Call the
// returned func when c has closed.
func (s *Sessions) take(ctx context.Context, c Session, cancel context.CancelCauseFunc) (release func()) {
	stamp, err := s.cfg.Claims.TakeConsole(ctx, c.Ref, c.Protocol, c.ID)
	if err != nil {
		s.cfg.Log.Warn("the holder's newest console not recorded: older ones on other replicas stay", "desktop", c.Ref, "protocol", c.Protocol, "err", err)
	}
	release = s.takeover.Take(c.Ref, c.Protocol, stamp, cancel)
	if stamp != "" {
		go KeepNewest(ctx, s.cfg.Claims, c.Ref, c.Protocol, stamp, cancel, s.cfg.Log)
	}
	return release
}

// TakeOver is, for the holder's serial console, the takeover Run would
// do, done before its handler dials: the holder's older serial console
// (and an admin's own, opened while nobody held the desktop), on any
// replica, ends now, so that it lets go of the line before the
// new one dials (Streams.Open); a line takes one client, and on KubeVirt
// a second kicks the first. An admin's own serial console is listed to
// give way to a holder's before it dials, so that one coming meanwhile
// ends it too. It sets c.TakenOver and returns the context to dial and
// Run c with, which ends when a newer one takes over in turn (or, an
// admin's own, a holder's comes); call leave once c has closed. For any
// other console it does nothing: Run takes over once it has connected.
func (s *Sessions) TakeOver(ctx context.Context, c *Session) (_ context.Context, leave func()) {
	holders := c.Protocol == vdi.ProtocolSerial && takesOver(*c)
	if !holders && !yields(*c) {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var release func()
	if holders {
		s.yielding.End(yieldKey(c.Ref), HolderCame(c.Holder)) // an admin's own, here; elsewhere keepYielding
		release = s.take(ctx, *c, cancel)
	} else {
		release = s.yield(ctx, *c, cancel) // it gives way from now on, while it dials too
	}
	c.TakenOver = true
	return ctx, func() {
		release()
		cancel(nil)
	}
}
