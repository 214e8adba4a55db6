package console

import (
	"context"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// An invitee's console lasts as long as its invitation: revoking or
// changing it closes the console at once on the replica that did it
// (Invitees) and, watching the claim, on every other (KeepShared).

// ShareEnded is the cause an invitee's console closes with; its text is
// the close frame's reason, which the page shows.
type ShareEnded string

func (e ShareEnded) Error() string { return string(e) }

// RoleChangedPrefix starts the close reason of an invitee's console whose
// role changed; the invitee's page (admin-shadow.js) reopens on it.
const RoleChangedPrefix = "Role changed: "

// RoleChanged is the cause an invitee's console closes with when the
// holder hands control over or takes it back.
func RoleChanged(sh vdi.Share) ShareEnded {
	if sh.Control {
		return ShareEnded(RoleChangedPrefix + sh.By + " gave you control.")
	}
	return ShareEnded(RoleChangedPrefix + "you watch again, view only.")
}

// Invitees keeps the open consoles of each invitation on this replica,
// so that revoking it closes them at once. The zero value is ready.
type Invitees struct {
	mu sync.Mutex
	by map[string]map[*context.CancelCauseFunc]struct{}
}

// Add notes cancel as a console of invitation id until remove is called.
func (v *Invitees) Add(id string, cancel context.CancelCauseFunc) (remove func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.by == nil {
		v.by = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if v.by[id] == nil {
		v.by[id] = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	v.by[id][key] = struct{}{}
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(v.by[id], key)
		if len(v.by[id]) == 0 {
			delete(v.by, id)
		}
	}
}

// End closes every console of invitation id with cause.
func (v *Invitees) End(id string, cause error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for c := range v.by[id] {
		(*c)(cause)
	}
}

// ShareChecker is what KeepShared reads of the claim service.
type ShareChecker interface {
	SharedDesktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, vdi.Share, error)
	ClaimChanged(ref vdi.Ref) <-chan struct{}
}

// KeepShared ends an invitee's console (cancel) once its invitation no
// longer holds: revoked or changed on another replica, the desktop
// released, run out, or the pool's rules changed. It checks at once when
// the claim changes on any replica (vdi.Service.ClaimChanged), and every
// `every` besides (the invitation running out, a store that reports no
// changes, a change missed while the watch reconnected). It returns when
// ctx ends.
func KeepShared(ctx context.Context, desktops ShareChecker, id vdi.Identity, ref vdi.Ref, sh vdi.Share, every time.Duration, cancel context.CancelCauseFunc) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		changed := desktops.ClaimChanged(ref) // before the check: a change during it wakes the wait
		_, cur, err := desktops.SharedDesktop(ctx, id, ref)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && cur.ID == sh.ID && cur.Control == sh.Control:
		case err == nil && cur.ID == sh.ID:
			cancel(RoleChanged(cur)) // changed on another replica
			return
		case !time.Now().Before(sh.Expires):
			cancel(ShareEnded("The invitation to this desktop ran out. Ask " + sh.By + " for a new one."))
			return
		case vdi.ErrorCode(err) == vdi.EUnavailable:
			// the claim cannot be read now; the relay goes on
		default:
			cancel(ShareEnded("The invitation to this desktop ended: it was revoked, or the desktop was released."))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
	}
}
