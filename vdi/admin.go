package vdi

import (
	"context"
	"errors"
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
	jobs := s.poolJobs(ctx)
	listed := make([]Pool, len(pools))
	for i, pc := range pools {
		listed[i] = pc.Pool
	}
	for _, p := range jobs.creating(listed) {
		pools = append(pools, poolClaims{Pool: p})
	}
	now := s.now()
	out := make([]PoolDashboard, 0, len(pools))
	for _, pc := range pools {
		p, held, members := pc.Pool, pc.held, pc.listed()
		pd := PoolDashboard{PoolStatus: statusOf(p, held, jobs),
			Effective: p.Policy.Effective(s.policy), Members: make([]MemberStatus, len(members))}
		pd.UnknownGroups, pd.AdminsOnly = s.accessWarnings(p.Access)
		pd.StandbyNow = s.StandbyWant(p, held)
		for i, m := range members {
			l := held[m.Name]
			ms := MemberStatus{Desktop: s.desktop(m, l, p)}
			if l != nil && ms.Resetting == "" {
				f, _ := FactsOf(l)
				if f.Open(now) {
					ms.Consoles = f.Consoles
				}
				ms.LastInput = f.LastInput
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
	if ErrorCode(err) == ENotFound {
		if l, lerr := s.leases.Get(ctx, ref); lerr == nil && l.reclaiming() {
			return Desktop{}, resettingErr(ref)
		}
	}
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
	a, err := s.route(ctx, p, TakeRequest{Login: user, Namespace: ref.Namespace, Pool: p.Name, Member: ref.Name})
	if err != nil {
		return Desktop{}, err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "assign", Namespace: ref.Namespace, Target: ref.Name, Detail: "to " + user})
	s.log.Info("assigned", "desktop", ref, "holder", user, "by", id.Login)
	return s.powerOn(ctx, a.Lease, true) // a VM's boot is not the admin's request to wait on
}

// takeAssigned takes member ref of pool p for user through leases, the
// store where user's rules are kept (claim_take.go): an assignment's
// reads and its one write.
func (s *Service) takeAssigned(ctx context.Context, leases Leases, p Pool, ref Ref, user string) (*Lease, error) {
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := s.checkQuota(ctx, user, p); err != nil {
		return nil, theirQuota(err, user)
	}
	old, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		old = nil
	} else if err != nil {
		return nil, unavailable(err)
	}
	if old != nil && !old.Expired(s.now()) && old.reclaiming() {
		return nil, resettingErr(ref)
	}
	if old != nil && !old.Expired(s.now()) {
		return nil, Errorf(EConflict, "Force-release it first, then assign it.", "Desktop %s is held by %s.", ref, old.Holder)
	}
	l, err := s.acquire(ctx, leases, p, m, old, user)
	var refused *Error
	if errors.As(err, &refused) {
		return nil, theirQuota(refused, user) // checked in the write
	} else if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
		return nil, Errorf(EConflict, "Look at the desktop again and retry.", "Desktop %s was claimed meanwhile.", ref)
	} else if err != nil {
		return nil, unavailable(err)
	}
	return l, nil
}

// theirQuota words err, a refusal of the quotas, for the admin who
// assigns a desktop to user.
func theirQuota(err error, user string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Msg = strings.Replace(e.Msg, "You hold", user+" holds", 1)
		e.Hint = "Release one of theirs first, or raise the limit."
	}
	return err
}

// Recreate makes a member fresh as RecreateJob does, waiting for the work
// to end.
func (s *Service) Recreate(ctx context.Context, id Identity, ref Ref) error {
	job, done, err := s.RecreateJob(ctx, id, ref)
	return s.waitJob(ctx, job, done, err)
}

// RecreateJob makes an unclaimed member fresh from its pool's source (a
// new home, a new clone). Only admins may; a held member is refused so
// that nobody loses work without a force-release first. Long work (a new
// clone) is left running as a job, returned as CreatePoolJob returns one.
func (s *Service) RecreateJob(ctx context.Context, id Identity, ref Ref) (*Job, <-chan error, error) {
	if err := requireAdmin(id); err != nil {
		return nil, nil, err
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	l, err := s.authorize(ctx, id, ref)
	if err != nil {
		return nil, nil, err
	}
	if l != nil {
		return nil, nil, Errorf(EConflict, "Force-release it first, then recreate it.", "Desktop %s is held by %s.", ref, l.Holder)
	}
	if pg, ok := s.backend.(PoolGrower); ok {
		g, err := pg.PlanRecreate(ctx, ref)
		if err == nil {
			job, done, err := s.startJob(ctx, jobRecord{Job: Job{Kind: JobRecreate, Namespace: ref.Namespace, Pool: m.Pool, Member: ref.Name,
				By: id.Login, Total: 1, Progress: "starting"}, Growth: &g})
			if err != nil {
				return nil, nil, err
			}
			s.record(ctx, AuditEvent{Actor: id.Login, Action: "recreate", Namespace: ref.Namespace, Target: ref.Name, Detail: "job " + job.ID})
			return &job, done, nil
		} else if !errors.Is(err, ErrNotAJob) {
			return nil, nil, err
		}
	}
	job, done, err := s.startQuick(ctx, jobRecord{Job: Job{Kind: JobRecreate, Namespace: ref.Namespace, Pool: m.Pool, Member: ref.Name,
		By: id.Login, Total: 1, Progress: "starting"}})
	if err != nil {
		return nil, nil, err
	}
	detail := ""
	if job != nil {
		detail = "job " + job.ID
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "recreate", Namespace: ref.Namespace, Target: ref.Name, Detail: detail})
	return job, done, nil
}
