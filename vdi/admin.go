package vdi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MemberStatus is a member as the admin dashboard shows it: the desktop
// with the session facts of its claim.
type MemberStatus struct {
	Desktop
	// Consoles counts the open consoles; 0 when none is confirmed alive.
	Consoles int `json:"consoles"`
	// LastInput is when a console last carried real user input.
	LastInput time.Time `json:"lastInput,omitzero"`
	// Reclaiming names the rule reclaiming the member right now, if any.
	Reclaiming string `json:"reclaiming,omitempty"`
	// Standby is set for a free, powered-on member of a pool that keeps
	// warm standby: the next claim gets it at once.
	Standby bool `json:"standby,omitempty"`
	// NotEntitled is set when the holder is no longer in the pool's access
	// (by login or the groups file): the desktop keeps working, the
	// holder's next claim is refused.
	NotEntitled bool `json:"notEntitled,omitempty"`
}

// PoolDashboard is a pool with every member's status.
type PoolDashboard struct {
	PoolStatus
	Running int `json:"running"`
	// Effective is the pool's policy with the portal's defaults filled in.
	Effective Policy         `json:"effective"`
	Members   []MemberStatus `json:"members"`
	// Warm counts the free members powered on, ready for the next claim.
	Warm int `json:"warm"`
	// StandbyNow is how many warm members the standby keeps now (its
	// demand-following size, or its schedule's floor).
	StandbyNow int `json:"standbyNow"`
	// AdminsOnly flags an access list that lets in only admins (a group
	// nobody is known to be in, or no user at all).
	AdminsOnly bool `json:"adminsOnly,omitempty"`
	// UnknownGroups are the access's groups that the groups file does not
	// list (they may still come from an identity provider).
	UnknownGroups []string `json:"unknownGroups,omitempty"`
}

// requireAdmin fails unless id is an admin.
func requireAdmin(id Identity) error {
	if id.Admin {
		return nil
	}
	return Errorf(EForbidden, "Ask an admin; admins are listed in CORRAL_VDI_ADMINS.", "Only admins may do this.")
}

// Dashboard returns every pool with its members, claims and session facts.
// Only admins may see it.
func (s *Service) Dashboard(ctx context.Context, id Identity) ([]PoolDashboard, error) {
	if err := requireAdmin(id); err != nil {
		return nil, err
	}
	pools, err := s.walkPools(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]PoolDashboard, 0, len(pools))
	for _, pc := range pools {
		p, held, members := pc.Pool, pc.held, pc.members
		pd := PoolDashboard{PoolStatus: PoolStatus{Pool: p, Claimed: len(held), Free: max(p.Size-len(held), 0)},
			Effective: p.Policy.Effective(s.policy), Members: make([]MemberStatus, len(members))}
		pd.UnknownGroups, pd.AdminsOnly = s.accessWarnings(p.Access)
		pd.StandbyNow = s.StandbyWant(p, held)
		for i, m := range members {
			l := held[m.Name]
			ms := MemberStatus{Desktop: s.desktop(m, l, p)}
			if l != nil {
				f, _ := FactsOf(l)
				if f.Open(now) {
					ms.Consoles = f.Consoles
				}
				ms.LastInput, ms.Reclaiming = f.LastInput, l.Annotations[AnnotationReclaiming]
				ms.NotEntitled = !p.Allows(s.identityOf(l.Holder))
			}
			if m.Power == PowerRunning {
				pd.Running++
				if l == nil && pd.StandbyNow > 0 {
					ms.Standby = true
					pd.Warm++
				}
			}
			pd.Members[i] = ms
		}
		out = append(out, pd)
	}
	return out, nil
}

// Assign gives a free member to user, as an admin's manual claim, and
// powers it on. A member someone holds must be force-released first.
func (s *Service) Assign(ctx context.Context, id Identity, ref Ref, user string) (Desktop, error) {
	if err := requireAdmin(id); err != nil {
		return Desktop{}, err
	}
	user = strings.TrimSpace(user)
	if user == "" {
		return Desktop{}, Errorf(EInvalid, `Send {"user": "login"}.`, "Say whom to assign %s to.", ref)
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return Desktop{}, err
	}
	p, err := s.backend.Pool(ctx, ref.Namespace, m.Pool)
	if err != nil {
		return Desktop{}, err
	}
	if !p.Allows(s.identityOf(user)) {
		return Desktop{}, Errorf(EForbidden, "Add them to the pool's access first, or pick a pool they may use.",
			"%s may not use pool %s, which is for %s.", user, p.Name, p.For())
	}
	unlock, err := s.lockClaims(ctx, ref.Namespace, user)
	if err != nil {
		return Desktop{}, err
	}
	defer unlock()
	if err := s.checkQuota(ctx, user, p); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Msg = strings.Replace(e.Msg, "You hold", user+" holds", 1)
			e.Hint = "Release one of theirs first, or raise the limit."
		}
		return Desktop{}, err
	}
	old, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		old = nil
	} else if err != nil {
		return Desktop{}, unavailable(err)
	}
	if old != nil && !old.Expired(s.now()) {
		return Desktop{}, Errorf(EConflict, "Force-release it first, then assign it.", "Desktop %s is held by %s.", ref, old.Holder)
	}
	l, err := s.acquire(ctx, p, m, old, user)
	if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
		return Desktop{}, Errorf(EConflict, "Look at the desktop again and retry.", "Desktop %s was claimed meanwhile.", ref)
	} else if err != nil {
		return Desktop{}, unavailable(err)
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "assign", Namespace: ref.Namespace, Target: ref.Name, Detail: "to " + user})
	s.log.Info("assigned", "desktop", ref, "holder", user, "by", id.Login)
	return s.powerOn(ctx, l)
}

// Recreate makes an unclaimed member fresh from its pool's source (a new
// home, a new clone). Only admins may; a held member is refused so that
// nobody loses work without a force-release first.
func (s *Service) Recreate(ctx context.Context, id Identity, ref Ref) error {
	if err := requireAdmin(id); err != nil {
		return err
	}
	if _, err := s.backend.Member(ctx, ref); err != nil {
		return err
	}
	l, err := s.authorize(ctx, id, ref)
	if err != nil {
		return err
	}
	if l != nil {
		return Errorf(EConflict, "Force-release it first, then recreate it.", "Desktop %s is held by %s.", ref, l.Holder)
	}
	if err := s.backend.Recreate(ctx, ref); err != nil {
		return &Error{Code: EUnavailable, Err: err, Msg: "Desktop " + ref.String() + " could not be recreated.", Hint: "Look at the portal's log, then try again."}
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "recreate", Namespace: ref.Namespace, Target: ref.Name})
	return nil
}

// PoolAdmin creates, resizes and deletes pools. Backends whose pools are
// declared elsewhere (kubectl on a cluster) need not implement it.
type PoolAdmin interface {
	// CreatePool makes pool p with p.Size stopped members.
	CreatePool(ctx context.Context, p Pool) error
	// ResizePool grows or shrinks a pool to size members. Shrinking removes
	// only members for which claimed reports false, and fails with
	// EConflict when too few are unclaimed.
	ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error
	// SetPolicy replaces a pool's reclaim policy.
	SetPolicy(ctx context.Context, namespace, name string, p Policy) error
	// SetAccess replaces who may use a pool and what one user may hold.
	SetAccess(ctx context.Context, namespace, name string, a Access, l Limits) error
	// SetStandby sets how many free members are kept powered on, and
	// when more are.
	SetStandby(ctx context.Context, namespace, name string, st Standby, sched StandbySchedule) error
	// DeletePool stops and removes every member of a pool, then the pool.
	DeletePool(ctx context.Context, namespace, name string) error
}

// MaxPoolSize bounds a pool's size: a whole team's morning (1,000 users)
// fits one pool.
const MaxPoolSize = 1000

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ValidName fails unless name is a DNS label (RFC 1123) short enough to
// leave room for a member suffix: lower-case letters, digits and dashes,
// starting and ending with a letter or digit, at most 56 characters.
func ValidName(what, name string) error {
	if len(name) > 56 || !dnsLabel.MatchString(name) {
		return Errorf(EInvalid, "Use lower-case letters, digits and dashes, starting and ending with a letter or digit, at most 56 characters.",
			"%q is not a valid %s name.", name, what)
	}
	return nil
}

// PoolUpdate changes a pool: nil fields stay as they are.
type PoolUpdate struct {
	Size    *int     `json:"size,omitempty"`
	Policy  *Policy  `json:"policy,omitempty"`
	Access  *Access  `json:"access,omitempty"`
	Limits  *Limits  `json:"limits,omitempty"`
	Standby *Standby `json:"standby,omitempty"`
	// StandbySchedule replaces the pool's schedule; {} removes it.
	StandbySchedule *StandbySchedule `json:"standbySchedule,omitempty"`
}

func (s *Service) poolAdmin(id Identity) (PoolAdmin, error) {
	if err := requireAdmin(id); err != nil {
		return nil, err
	}
	pa, ok := s.backend.(PoolAdmin)
	if !ok {
		return nil, Errorf(EInvalid, "Manage this backend's pools where they are declared (e.g. with kubectl).", "This portal cannot create, resize or delete pools.")
	}
	return pa, nil
}

func validSize(size int) error {
	if size < 0 || size > MaxPoolSize {
		return Errorf(EInvalid, fmt.Sprintf("Pick a size from 0 to %d.", MaxPoolSize), "Size %d is out of range.", size)
	}
	return nil
}

func validPolicy(p Policy) error {
	if p.DisconnectGrace < 0 || p.MaxSession < 0 || p.IdleTimeout < 0 {
		return Errorf(EInvalid, "Use zero for the default (grace) or off (max session, idle).", "Policy durations cannot be negative.")
	}
	if !p.Clipboard.Valid() {
		return Errorf(EInvalid, "Use both, to-desktop, from-desktop or off.", "Unknown clipboard policy %q.", p.Clipboard)
	}
	if !p.Watch.Valid() {
		return Errorf(EInvalid, "Use notify, consent or off.", "Unknown watch policy %q.", p.Watch)
	}
	if p.Network != "" && p.Network != NetworkOutbound && p.Network != NetworkNone {
		return Errorf(EInvalid, "Use outbound or none.", "Unknown network policy %q.", p.Network)
	}
	return nil
}

// CreatePool creates a pool (admins only) and audit-logs it.
func (s *Service) CreatePool(ctx context.Context, id Identity, p Pool) error {
	pa, err := s.poolAdmin(id)
	if err != nil {
		return err
	}
	if p.Mode == "" {
		p.Mode = ModeEphemeral
	}
	if p.Kind == "" {
		p.Kind = KindCT
	}
	if err := ValidName("pool", p.Name); err != nil {
		return err
	}
	switch {
	case p.Namespace == "" || ValidName("namespace", p.Namespace) != nil:
		return Errorf(EInvalid, "Name an existing namespace, e.g. local.", "%q is not a valid namespace.", p.Namespace)
	case !slices.Contains([]Mode{ModePersistent, ModeEphemeral}, p.Mode):
		return Errorf(EInvalid, "Use persistent or ephemeral.", "Unknown mode %q.", p.Mode)
	case !slices.Contains([]Kind{KindCT, KindVM}, p.Kind):
		return Errorf(EInvalid, "Use ct or vm.", "Unknown kind %q.", p.Kind)
	}
	if err := validSize(p.Size); err != nil {
		return err
	}
	if err := validPolicy(p.Policy); err != nil {
		return err
	}
	if err := validAccess(p.Access); err != nil {
		return err
	}
	if err := validLimits(p.Limits); err != nil {
		return err
	}
	if err := validStandby(p.Standby); err != nil {
		return err
	}
	if err := validSchedule(p.StandbySchedule); err != nil {
		return err
	}
	if err := pa.CreatePool(ctx, p); err != nil {
		return err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-create", Namespace: p.Namespace, Target: p.Name,
		Detail: fmt.Sprintf("kind %s; mode %s; size %d; access %s; %s; standby %s; schedule %s",
			p.Kind, p.Mode, p.Size, p.Access, limitsDetail(p.Limits), p.Standby, p.StandbySchedule)})
	return nil
}

// UpdatePool resizes a pool or replaces its policy (admins only). Shrinking
// never removes a claimed member.
func (s *Service) UpdatePool(ctx context.Context, id Identity, namespace, name string, u PoolUpdate) error {
	pa, err := s.poolAdmin(id)
	if err != nil {
		return err
	}
	p, err := s.backend.Pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	if u.Policy != nil {
		if err := validPolicy(*u.Policy); err != nil {
			return err
		}
		if err := pa.SetPolicy(ctx, namespace, name, *u.Policy); err != nil {
			return err
		}
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-policy", Namespace: namespace, Target: name,
			Detail: fmt.Sprintf("grace %s; max session %s; idle %s; clipboard %s; file transfer %s; audio %t; record %t; record input %t; own recordings %t; watch %s; network %s", u.Policy.DisconnectGrace, u.Policy.MaxSession, u.Policy.IdleTimeout,
				u.Policy.Console().Clipboard, u.Policy.FileTransfer, u.Policy.Audio.On(), u.Policy.Record, u.Policy.RecordInput, u.Policy.OwnRecordings, u.Policy.Console().Watch, networkText(u.Policy.Network))})
	}
	if u.Access != nil || u.Limits != nil {
		a, l := p.Access, p.Limits
		if u.Access != nil {
			a = *u.Access
		}
		if u.Limits != nil {
			l = *u.Limits
		}
		if err := validAccess(a); err != nil {
			return err
		}
		if err := validLimits(l); err != nil {
			return err
		}
		if err := pa.SetAccess(ctx, namespace, name, a, l); err != nil {
			return err
		}
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-access", Namespace: namespace, Target: name,
			Detail: fmt.Sprintf("access %s -> %s; %s -> %s", p.Access, a, limitsDetail(p.Limits), limitsDetail(l))})
	}
	st, sched := p.Standby, p.StandbySchedule
	if u.Standby != nil {
		st = *u.Standby
	}
	if u.StandbySchedule != nil {
		sched = *u.StandbySchedule
	}
	if st != p.Standby || sched != p.StandbySchedule {
		if err := validStandby(st); err != nil {
			return err
		}
		if err := validSchedule(sched); err != nil {
			return err
		}
		if err := pa.SetStandby(ctx, namespace, name, st, sched); err != nil {
			return err
		}
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-standby", Namespace: namespace, Target: name,
			Detail: fmt.Sprintf("standby %s -> %s; schedule %s -> %s", p.Standby, st, p.StandbySchedule, sched)})
		s.kickStandby()
	}
	if u.Size != nil && *u.Size != p.Size {
		if err := validSize(*u.Size); err != nil {
			return err
		}
		held, err := s.held(ctx, namespace, name)
		if err != nil {
			return err
		}
		if err := pa.ResizePool(ctx, namespace, name, *u.Size, func(m string) bool { return held[m] != nil }); err != nil {
			return err
		}
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-resize", Namespace: namespace, Target: name,
			Detail: fmt.Sprintf("size %d -> %d", p.Size, *u.Size)})
	}
	return nil
}

// DeletePool deletes a pool whose members nobody holds (admins only).
func (s *Service) DeletePool(ctx context.Context, id Identity, namespace, name string) error {
	pa, err := s.poolAdmin(id)
	if err != nil {
		return err
	}
	if _, err := s.backend.Pool(ctx, namespace, name); err != nil {
		return err
	}
	held, err := s.held(ctx, namespace, name)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return Errorf(EConflict, "Force-release its desktops first.", "Pool %s/%s has %d claimed desktops.", namespace, name, len(held))
	}
	if err := pa.DeletePool(ctx, namespace, name); err != nil {
		return err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-delete", Namespace: namespace, Target: name})
	return nil
}
