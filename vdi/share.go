package vdi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sharing: the holder of a desktop (or an admin) invites another user to
// its console, view only or with control, until an expiry. Invitations
// are kept on the claim's own Lease (AnnotationShares), so every replica
// sees the same ones and a release, a reclaim or a new claim ends them all
// with the Lease: the claim is the truth for who may look at it, too.

// AnnotationShares is the Lease annotation that holds the claim's
// invitations, as a JSON list of Share.
const AnnotationShares = "corral.dev/vdi-shares"

// Invitation bounds.
const (
	// MaxShares is how many invitations one claim may hold at once, so a
	// Lease stays small.
	MaxShares = 8
	// DefaultShareTTL is an invitation's life when none is asked for.
	DefaultShareTTL = time.Hour
	// MaxShareTTL is the longest an invitation may live.
	MaxShareTTL = 24 * time.Hour
)

// Share is one invitation to a desktop's console.
type Share struct {
	ID string `json:"id"`
	// User is the invited login.
	User string `json:"user"`
	// Control lets the user type and point; otherwise view only.
	Control bool `json:"control"`
	// By is who invited: the holder, or an admin.
	By      string    `json:"by"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// Override is an admin's invitation of a user the pool's access rules
	// leave out.
	Override bool `json:"override,omitempty"`
	// RoleChanged says, as Share answers, that the user was invited
	// already with the other role: consoles opened with it reopen. It is
	// never stored.
	RoleChanged bool `json:"-"`
}

// Live reports whether the invitation holds at now.
func (sh Share) Live(now time.Time) bool { return now.Before(sh.Expires) }

// SharesOf reads l's invitations. A malformed annotation (a Lease edited
// by hand) reads as none, with the reason in err: it never lets anyone in.
func SharesOf(l *Lease) ([]Share, error) {
	v := l.Annotations[AnnotationShares]
	if v == "" {
		return nil, nil
	}
	var list []Share
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return nil, fmt.Errorf("annotation %s is not a list of invitations: %w", AnnotationShares, err)
	}
	return list, nil
}

// storeShares writes list into l's annotations.
func storeShares(l *Lease, list []Share) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if len(list) == 0 {
		delete(l.Annotations, AnnotationShares)
		return
	}
	b, _ := json.Marshal(list)
	l.Annotations[AnnotationShares] = string(b)
}

// ShareRequest is what an invitation asks for.
type ShareRequest struct {
	User    string
	Control bool
	// Expires is the invitation's life as a Go duration ("30m", "2h"):
	// empty means DefaultShareTTL.
	Expires string
}

// Share invites req.User to ref's console. Only the holder and admins may
// invite, only while the desktop is claimed, and never the holder
// themself. A user has one invitation per desktop: inviting them again
// updates it (its role and expiry), so one revoke ends their access. A user the pool's access rules leave out is refused, unless an
// admin invites them (an override, audited as such).
func (s *Service) Share(ctx context.Context, id Identity, ref Ref, req ShareRequest) (Share, error) {
	d, l, err := s.sharable(ctx, id, ref) // who asks comes first: a stranger learns nothing from the request's faults
	if err != nil {
		return Share{}, err
	}
	req.User = strings.TrimSpace(req.User)
	if req.User == "" || len(req.User) > 256 || strings.ContainsAny(req.User, " \t\r\n") {
		return Share{}, Errorf(EInvalid, `Send the login of the person to invite, such as {"user": "bob"}.`, "No valid login to invite.")
	}
	ttl := DefaultShareTTL
	if req.Expires != "" {
		if ttl, err = time.ParseDuration(req.Expires); err != nil {
			return Share{}, Errorf(EInvalid, `Give "expires" as a duration such as "30m" or "2h".`, "Expiry %q is not a duration.", req.Expires)
		}
	}
	if ttl < time.Minute || ttl > MaxShareTTL {
		return Share{}, Errorf(EInvalid, "Ask for 1m to 24h, such as \"1h\".", "An invitation lives from a minute to a day, not %v.", ttl)
	}
	if req.User == l.Holder {
		return Share{}, Errorf(EInvalid, "Invite someone else: the holder has the console already.", "%s holds %s.", req.User, ref)
	}
	pool, err := s.backend.Pool(ctx, ref.Namespace, d.Pool)
	if err != nil {
		return Share{}, err
	}
	override := false
	if !pool.Allows(s.identityOf(req.User)) {
		if !id.Admin {
			return Share{}, Errorf(EForbidden, "Invite someone the pool is for, or ask an admin to invite them.",
				"Pool %s is for %s; %s is not.", pool.Name, pool.For(), req.User)
		}
		override = true
	}
	sh := Share{ID: newShareID(), User: req.User, Control: req.Control, By: id.Login, Created: s.now(), Override: override}
	sh.Expires = sh.Created.Add(ttl)
	err = s.updateClaim(ctx, ref, l.Holder, func(l *Lease, now time.Time) error {
		list := liveShares(l, now)
		if i := slices.IndexFunc(list, func(old Share) bool { return old.User == sh.User }); i >= 0 {
			sh.ID, sh.RoleChanged = list[i].ID, list[i].Control != sh.Control
			list[i] = sh
			storeShares(l, list)
			return nil
		}
		if len(list) >= MaxShares {
			return Errorf(EConflict, "Revoke an invitation you no longer need, then invite again.",
				"%s has %d invitations, the most a desktop may have.", ref, MaxShares)
		}
		storeShares(l, append(list, sh))
		return nil
	})
	if err != nil {
		return Share{}, err
	}
	detail := fmt.Sprintf("user %s; %s; until %s", sh.User, shareRole(sh), sh.Expires.UTC().Format(time.RFC3339))
	if override {
		detail += "; past the pool's access rules"
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "share", Namespace: ref.Namespace, Target: ref.Name, Detail: detail})
	return sh, nil
}

// Shares lists ref's live invitations, for its holder and admins.
func (s *Service) Shares(ctx context.Context, id Identity, ref Ref) ([]Share, error) {
	_, l, err := s.sharable(ctx, id, ref)
	if err != nil {
		return nil, err
	}
	return liveShares(l, s.now()), nil
}

// Unshare revokes invitation shareID of ref. Consoles opened with it close
// (the handlers end this replica's at once; every other replica's invitee
// session checks its invitation when it sees the claim change,
// ClaimChanged).
func (s *Service) Unshare(ctx context.Context, id Identity, ref Ref, shareID string) (Share, error) {
	_, l, err := s.sharable(ctx, id, ref)
	if err != nil {
		return Share{}, err
	}
	var gone Share
	err = s.updateClaim(ctx, ref, l.Holder, func(l *Lease, now time.Time) error {
		list := liveShares(l, now)
		i := slices.IndexFunc(list, func(sh Share) bool { return sh.ID == shareID })
		if i < 0 {
			return Errorf(ENotFound, "List the desktop's invitations to see which are left.", "No invitation %q on %s.", shareID, ref)
		}
		gone = list[i]
		storeShares(l, slices.Delete(list, i, i+1))
		return nil
	})
	if err != nil {
		return Share{}, err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "unshare", Namespace: ref.Namespace, Target: ref.Name, Detail: "user " + gone.User})
	return gone, nil
}

// SetShareControl hands control of ref to the user of invitation shareID,
// or takes it back: their console reopens with the new role (the handlers
// close it at once here; other replicas' when they see the claim
// change, ClaimChanged).
func (s *Service) SetShareControl(ctx context.Context, id Identity, ref Ref, shareID string, control bool) (Share, error) {
	_, l, err := s.sharable(ctx, id, ref)
	if err != nil {
		return Share{}, err
	}
	var changed Share
	err = s.updateClaim(ctx, ref, l.Holder, func(l *Lease, now time.Time) error {
		list := liveShares(l, now)
		i := slices.IndexFunc(list, func(sh Share) bool { return sh.ID == shareID })
		if i < 0 {
			return Errorf(ENotFound, "List the desktop's invitations to see which are left.", "No invitation %q on %s.", shareID, ref)
		}
		list[i].Control = control
		changed = list[i]
		storeShares(l, list)
		return nil
	})
	if err != nil {
		return Share{}, err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "share-control", Namespace: ref.Namespace, Target: ref.Name,
		Detail: "user " + changed.User + "; " + shareRole(changed)})
	return changed, nil
}

// ShareCheckEvery is how often an invitee's open console checks that its
// invitation still holds besides each change of the claim (ClaimChanged):
// an invitation running out, a Leases store that reports no changes.
const ShareCheckEvery = 2 * time.Second

// SharedDesktop returns ref for an invited user: the desktop and the live
// invitation of id on it. Anyone without one gets the refusal a stranger
// gets from Desktop, so invitations cannot be probed. The pool's access
// rules apply to the invitee as they sign in now, unless an admin's
// invitation overrides them; a pool whose watch policy is off takes no
// viewers at all.
func (s *Service) SharedDesktop(ctx context.Context, id Identity, ref Ref) (Desktop, Share, error) {
	notYours := Errorf(EForbidden, "Ask its holder to invite you again, or get a desktop of your own on the home page.",
		"Desktop %s is not yours, and no invitation to it is open for you.", ref)
	if id.Token != nil { // invitations are to people: an agent works on its own claims only
		return Desktop{}, Share{}, notYours
	}
	l, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return Desktop{}, Share{}, notYours
	} else if err != nil {
		return Desktop{}, Share{}, unavailable(err)
	}
	now := s.now()
	if l.Expired(now) || l.Annotations[AnnotationReclaiming] != "" {
		return Desktop{}, Share{}, notYours
	}
	i := slices.IndexFunc(liveShares(l, now), func(sh Share) bool { return sh.User == id.Login })
	if i < 0 {
		return Desktop{}, Share{}, notYours
	}
	sh := liveShares(l, now)[i]
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return Desktop{}, Share{}, err
	}
	p, err := s.backend.Pool(ctx, ref.Namespace, m.Pool)
	if err != nil {
		return Desktop{}, Share{}, err
	}
	if !sh.Override && !p.Allows(id) {
		return Desktop{}, Share{}, forbidden(p)
	}
	d := plainFor(id, s.desktop(m, l, p))
	if d.Console.Watch == WatchOff {
		return Desktop{}, Share{}, notYours
	}
	return d, sh, nil
}

// sharable returns ref's desktop and live claim when id may manage its
// invitations: its holder, or an admin, on a claimed desktop whose pool
// takes viewers.
func (s *Service) sharable(ctx context.Context, id Identity, ref Ref) (Desktop, *Lease, error) {
	d, err := s.Desktop(ctx, id, ref)
	if err != nil {
		return Desktop{}, nil, err
	}
	l, err := s.authorize(ctx, id, ref)
	if err != nil {
		return Desktop{}, nil, err
	}
	if l == nil {
		return Desktop{}, nil, Errorf(EConflict, "Claim it first: only a claimed desktop can be shared.", "Desktop %s is not claimed.", ref)
	}
	if d.Console.Watch == WatchOff {
		return Desktop{}, nil, Errorf(EForbidden, "Share your screen another way, or ask an admin to change the pool's watch policy.",
			"The pool's policy keeps viewers off %s: only its holder opens its consoles.", ref)
	}
	return d, l, nil
}

// liveShares returns l's invitations that hold at now (a malformed list
// reads as none).
func liveShares(l *Lease, now time.Time) []Share {
	list, _ := SharesOf(l)
	return slices.DeleteFunc(list, func(sh Share) bool { return !sh.Live(now) })
}

func shareRole(sh Share) string {
	if sh.Control {
		return "with control"
	}
	return "view only"
}

func newShareID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return hex.EncodeToString(b)
}
