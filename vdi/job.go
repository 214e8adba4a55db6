package vdi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Long pool work (cloning members, removing them) runs as a job, detached
// from the request that asked for it: the request answers as soon as the
// work is checked and under way, and the job's state is kept where the
// pool's truth is — a Lease of the claim store (on Kubernetes a Lease in
// the pool's namespace) — so that any replica can show it, and the reclaim
// loop finishes a job whose replica died.

// JobKind says what a job does.
type JobKind string

// Job kinds.
const (
	JobCreate   JobKind = "create"
	JobGrow     JobKind = "grow"
	JobShrink   JobKind = "shrink"
	JobRecreate JobKind = "recreate"
)

// JobState is where a job stands.
type JobState string

// Job states.
const (
	JobRunning JobState = "running"
	JobDone    JobState = "done"
	JobFailed  JobState = "failed"
	// JobCancelled: an admin stopped it (CancelJob).
	JobCancelled JobState = "cancelled"
)

// Job is long work on a pool, one at a time per pool.
type Job struct {
	// ID tells this job from the pool's earlier and later ones.
	ID        string  `json:"id"`
	Kind      JobKind `json:"kind"`
	Namespace string  `json:"namespace"`
	Pool      string  `json:"pool"`
	// Member is the desktop a recreate makes fresh.
	Member string   `json:"member,omitempty"`
	State  JobState `json:"state"`
	// Progress says what the job is doing, e.g. "cloning 3 of 6
	// (snapshot ready, restoring…)".
	Progress string `json:"progress,omitempty"`
	Done     int    `json:"done"`
	Total    int    `json:"total"`
	// Error and Hint say why a failed job failed and what to do.
	Error string `json:"error,omitempty"`
	Hint  string `json:"hint,omitempty"`
	// By is the admin who asked for it.
	By      string    `json:"by"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// Progress is a job's report of how far it got.
type Progress struct {
	Done, Total int
	// Text is what the job does now, e.g. "cloning 3 of 6 (snapshot
	// ready, restoring…)".
	Text string
}

// Growth is new members of a pool: the pool's definition, which they
// carry, and their names.
type Growth struct {
	Pool    Pool     `json:"pool"`
	Members []string `json:"members"`
	// Replaces names, for a recreate, what the member it makes fresh was
	// (on Kubernetes its VM's UID): a replica that finishes the job and
	// finds that one still there makes it fresh, never keeps it.
	Replaces map[string]string `json:"replaces,omitempty"`
}

// ErrNotAJob is what a PoolGrower's Plan methods answer for work that is
// done at once (a pool declared in one object, whose members are made on
// demand): the caller does it within the request.
var ErrNotAJob = errors.New("vdi: this work is done at once, not as a job")

// PoolGrower is a PoolAdmin whose growing is long: it is checked at once
// (bad input fails the request) and carried out by a job that any replica
// can finish.
type PoolGrower interface {
	// PlanCreate checks creating p and names the members to make.
	PlanCreate(ctx context.Context, p Pool) (Growth, error)
	// PlanResize checks resizing pool namespace/name to size members and
	// names the new ones; a shrink names none, and answers ErrNotAJob
	// where removing members is quick.
	PlanResize(ctx context.Context, namespace, name string, size int) (Growth, error)
	// PlanRecreate checks making ref fresh and returns its pool's
	// definition with ref as the one member, for a replica that finds the
	// old member gone to make it again.
	PlanRecreate(ctx context.Context, ref Ref) (Growth, error)
	// Grow makes those of g.Members that are not there yet (or are still
	// the one g.Replaces names), reporting its progress. Run again on the
	// same g after a replica died, it finishes what is left (and takes
	// over clones under way).
	Grow(ctx context.Context, g Growth, progress func(Progress)) error
}

// Job Leases: one per pool, named after the pool with jobSuffix (a dot: no
// member's name has one), with jobPool as their pool (no pool can be named
// that), so no pool lists them as claims.
const (
	jobPool   = "pool.job"
	jobSuffix = ".job"
	// AnnotationJob holds a job's record (JSON) on its Lease.
	AnnotationJob = "corral.dev/vdi-job"
	// jobLease is how long a job's Lease lasts unrenewed: a replica that
	// stops renewing for this long is taken for dead, and the reclaim loop
	// finishes its job.
	jobLease = 20 * time.Second
	// jobRenew is how often a running job renews its Lease.
	jobRenew = 5 * time.Second
)

// jobRecord is what a job's Lease keeps: the job and what a replica needs
// to finish it.
type jobRecord struct {
	Job
	// Growth is the members a create, grow or recreate makes.
	Growth *Growth `json:"growth,omitempty"`
	// Size is the size a shrink, or a resize done at once, goes to.
	Size int `json:"size,omitempty"`
	// Create is the pool a create done at once makes (no Growth: the
	// backend makes its members itself, see startQuick).
	Create *Pool `json:"create,omitempty"`
	// Resumed is set on a job taken over from a portal that stopped.
	Resumed bool `json:"resumed,omitempty"`
}

func jobRef(namespace, pool string) Ref { return Ref{Namespace: namespace, Name: pool + jobSuffix} }

// recordOf reads a job's Lease.
func recordOf(l *Lease) (jobRecord, error) {
	var rec jobRecord
	if err := json.Unmarshal([]byte(l.Annotations[AnnotationJob]), &rec); err != nil {
		return rec, fmt.Errorf("vdi: job %s: %w", l.Ref(), err)
	}
	return rec, nil
}

func (rec jobRecord) write(l *Lease) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	l.Annotations = map[string]string{AnnotationJob: string(b)}
	return nil
}

// Job returns the last job of pool namespace/name (admins only).
func (s *Service) Job(ctx context.Context, id Identity, namespace, name string) (Job, error) {
	if err := requireAdmin(id); err != nil {
		return Job{}, err
	}
	l, err := s.leases.Get(ctx, jobRef(namespace, name))
	if errors.Is(err, ErrNotFound) {
		return Job{}, Errorf(ENotFound, "Jobs are made by creating, resizing or recreating; list them with GET /api/vdi/jobs.", "Pool %s/%s has no job.", namespace, name)
	} else if err != nil {
		return Job{}, unavailable(err)
	}
	rec, err := recordOf(l)
	if err != nil {
		return Job{}, &Error{Code: EInternal, Err: err, Msg: "The pool's job cannot be read.", Hint: "Look at the portal's log."}
	}
	return rec.Job, nil
}

// Jobs returns every pool's last job (admins only).
func (s *Service) Jobs(ctx context.Context, id Identity) ([]Job, error) {
	if err := requireAdmin(id); err != nil {
		return nil, err
	}
	recs, err := s.jobRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.rec.Job)
	}
	return out, nil
}

// jobLeaseRec is a job's Lease with its record.
type jobLeaseRec struct {
	lease *Lease
	rec   jobRecord
}

// jobRecords lists the jobs' Leases, skipping (and logging) unreadable ones.
func (s *Service) jobRecords(ctx context.Context) ([]jobLeaseRec, error) {
	ls, err := s.leases.List(ctx, "", jobPool)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]jobLeaseRec, 0, len(ls))
	for _, l := range ls {
		rec, err := recordOf(l)
		if err != nil {
			s.log.Warn("unreadable job", "lease", l.Ref(), "err", err)
			continue
		}
		out = append(out, jobLeaseRec{l, rec})
	}
	return out, nil
}

// poolJobs returns the jobs by pool ("ns/name"); nil on an error, which
// only costs the pool list its job lines.
func (s *Service) poolJobs(ctx context.Context) jobsByPool {
	recs, err := s.jobRecords(ctx)
	if err != nil {
		s.log.Warn("list jobs", "err", err)
		return nil
	}
	out := make(jobsByPool, len(recs))
	for _, r := range recs {
		out[r.rec.Namespace+"/"+r.rec.Pool] = r.rec
	}
	return out
}

// jobsByPool is the pools' jobs by "ns/name".
type jobsByPool map[string]jobRecord

// of returns the job of p, or nil.
func (js jobsByPool) of(p Pool) *Job {
	rec, ok := js[p.Namespace+"/"+p.Name]
	if !ok {
		return nil
	}
	return &rec.Job
}

// creating returns the pools being created that have no member yet, as
// far as their jobs say, with no member.
func (js jobsByPool) creating(listed []Pool) []Pool {
	var out []Pool
	for _, rec := range js {
		if rec.Kind != JobCreate || rec.State != JobRunning || rec.Growth == nil ||
			slices.ContainsFunc(listed, func(p Pool) bool { return p.Namespace == rec.Namespace && p.Name == rec.Pool }) {
			continue
		}
		p := rec.Growth.Pool
		p.Size = 0
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pool) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}
