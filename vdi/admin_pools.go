package vdi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
)

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

// CreatePool creates a pool (admins only) and audit-logs it, waiting for
// the work to end (see CreatePoolJob).
func (s *Service) CreatePool(ctx context.Context, id Identity, p Pool) error {
	job, done, err := s.CreatePoolJob(ctx, id, p)
	return s.waitJob(ctx, job, done, err)
}

// CreatePoolJob creates a pool (admins only) and audit-logs it. Long work
// (cloning members) is checked, then left running as a job, which it
// returns with the channel its end is sent on; work done at once returns
// a nil job.
func (s *Service) CreatePoolJob(ctx context.Context, id Identity, p Pool) (*Job, <-chan error, error) {
	pa, err := s.poolAdmin(id)
	if err != nil {
		return nil, nil, err
	}
	if p.Mode == "" {
		p.Mode = ModeEphemeral
	}
	if p.Kind == "" {
		p.Kind = KindCT
	}
	if err := ValidName("pool", p.Name); err != nil {
		return nil, nil, err
	}
	switch {
	case p.Namespace == "" || ValidName("namespace", p.Namespace) != nil:
		return nil, nil, Errorf(EInvalid, "Name an existing namespace, e.g. local.", "%q is not a valid namespace.", p.Namespace)
	case !slices.Contains([]Mode{ModePersistent, ModeEphemeral}, p.Mode):
		return nil, nil, Errorf(EInvalid, "Use persistent or ephemeral.", "Unknown mode %q.", p.Mode)
	case !slices.Contains([]Kind{KindCT, KindVM}, p.Kind):
		return nil, nil, Errorf(EInvalid, "Use ct or vm.", "Unknown kind %q.", p.Kind)
	}
	if err := validSize(p.Size); err != nil {
		return nil, nil, err
	}
	if err := validPolicy(p.Policy); err != nil {
		return nil, nil, err
	}
	if err := validAccess(p.Access); err != nil {
		return nil, nil, err
	}
	if err := validLimits(p.Limits); err != nil {
		return nil, nil, err
	}
	if err := validStandby(p.Standby); err != nil {
		return nil, nil, err
	}
	if err := validSchedule(p.StandbySchedule); err != nil {
		return nil, nil, err
	}
	detail := fmt.Sprintf("kind %s; mode %s; size %d; access %s; %s; standby %s; schedule %s",
		p.Kind, p.Mode, p.Size, p.Access, limitsDetail(p.Limits), p.Standby, p.StandbySchedule)
	if pg, ok := pa.(PoolGrower); ok {
		g, err := pg.PlanCreate(ctx, p)
		if err == nil {
			job, done, err := s.startJob(ctx, jobRecord{Job: Job{Kind: JobCreate, Namespace: p.Namespace, Pool: p.Name, By: id.Login,
				Total: len(g.Members), Progress: "starting"}, Growth: &g})
			if err != nil {
				return nil, nil, err
			}
			s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-create", Namespace: p.Namespace, Target: p.Name, Detail: detail + "; job " + job.ID})
			return &job, done, nil
		} else if !errors.Is(err, ErrNotAJob) {
			return nil, nil, err
		}
	}
	job, done, err := s.startQuick(ctx, jobRecord{Job: Job{Kind: JobCreate, Namespace: p.Namespace, Pool: p.Name, By: id.Login, Total: 1,
		Progress: "starting"}, Create: &p})
	if err != nil {
		return nil, nil, err
	}
	if job != nil {
		detail += "; job " + job.ID
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-create", Namespace: p.Namespace, Target: p.Name, Detail: detail})
	return job, done, nil
}

// UpdatePool changes a pool as UpdatePoolJob does, waiting for a resize
// to end.
func (s *Service) UpdatePool(ctx context.Context, id Identity, namespace, name string, u PoolUpdate) error {
	job, done, err := s.UpdatePoolJob(ctx, id, namespace, name, u)
	return s.waitJob(ctx, job, done, err)
}

// UpdatePoolJob resizes a pool or replaces its policy (admins only).
// Shrinking never removes a claimed member. A long resize is checked, then
// left running as a job, returned as CreatePoolJob returns one.
func (s *Service) UpdatePoolJob(ctx context.Context, id Identity, namespace, name string, u PoolUpdate) (*Job, <-chan error, error) {
	pa, err := s.poolAdmin(id)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.backend.Pool(ctx, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	if u.Policy != nil {
		if err := validPolicy(*u.Policy); err != nil {
			return nil, nil, err
		}
		if err := pa.SetPolicy(ctx, namespace, name, *u.Policy); err != nil {
			return nil, nil, err
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
			return nil, nil, err
		}
		if err := validLimits(l); err != nil {
			return nil, nil, err
		}
		if err := pa.SetAccess(ctx, namespace, name, a, l); err != nil {
			return nil, nil, err
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
			return nil, nil, err
		}
		if err := validSchedule(sched); err != nil {
			return nil, nil, err
		}
		if err := pa.SetStandby(ctx, namespace, name, st, sched); err != nil {
			return nil, nil, err
		}
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-standby", Namespace: namespace, Target: name,
			Detail: fmt.Sprintf("standby %s -> %s; schedule %s -> %s", p.Standby, st, p.StandbySchedule, sched)})
		s.kickStandby()
	}
	if u.Size == nil || *u.Size == p.Size {
		return nil, nil, nil
	}
	if err := validSize(*u.Size); err != nil {
		return nil, nil, err
	}
	return s.resize(ctx, id, pa, p, *u.Size)
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
	job, err := s.leases.Get(ctx, jobRef(namespace, name))
	if err == nil {
		if rec, rerr := recordOf(job); rerr == nil && rec.State == JobRunning {
			return rec.busy("Wait for it to finish (GET /api/vdi/pools/" + namespace + "/" + name + "/job), then delete the pool.")
		}
	} else if !errors.Is(err, ErrNotFound) {
		return unavailable(err)
	}
	if err := pa.DeletePool(ctx, namespace, name); err != nil {
		return err
	}
	if job != nil {
		if err := s.leases.Delete(ctx, job); err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("delete the pool's last job", "pool", namespace+"/"+name, "err", err)
		}
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-delete", Namespace: namespace, Target: name})
	return nil
}

// resize grows or shrinks pool p to size: as a job where the backend's
// work is long, else at once.
func (s *Service) resize(ctx context.Context, id Identity, pa PoolAdmin, p Pool, size int) (*Job, <-chan error, error) {
	detail := fmt.Sprintf("size %d -> %d", p.Size, size)
	held, err := s.held(ctx, p.Namespace, p.Name)
	if err != nil {
		return nil, nil, err
	}
	if pg, ok := pa.(PoolGrower); ok {
		g, err := pg.PlanResize(ctx, p.Namespace, p.Name, size)
		rec := jobRecord{Job: Job{Kind: JobShrink, Namespace: p.Namespace, Pool: p.Name, By: id.Login, Progress: "starting"}, Size: size}
		if size > p.Size {
			rec.Kind, rec.Growth, rec.Total = JobGrow, &g, len(g.Members)
		} else if free := p.Size - len(held); err == nil && free < p.Size-size {
			return nil, nil, Errorf(EConflict, "Release some desktops first, or pick a larger size.",
				"Only %d of pool %s/%s's %d desktops are free; shrinking to %d needs %d.", free, p.Namespace, p.Name, p.Size, size, p.Size-size)
		}
		if err == nil {
			job, done, err := s.startJob(ctx, rec)
			if err != nil {
				return nil, nil, err
			}
			s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-resize", Namespace: p.Namespace, Target: p.Name, Detail: detail + "; job " + job.ID})
			return &job, done, nil
		} else if !errors.Is(err, ErrNotAJob) {
			return nil, nil, err
		}
	}
	rec := jobRecord{Job: Job{Kind: JobGrow, Namespace: p.Namespace, Pool: p.Name, By: id.Login, Total: 1, Progress: "starting"}, Size: size}
	if size < p.Size {
		rec.Kind = JobShrink
	}
	job, done, err := s.startQuick(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	if job != nil {
		detail += "; job " + job.ID
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "pool-resize", Namespace: p.Namespace, Target: p.Name, Detail: detail})
	return job, done, nil
}
