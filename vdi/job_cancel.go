package vdi

import (
	"context"
	"errors"
	"time"
)

// JobKeep is how long a job's record stays after it ended (done, failed
// or cancelled): long enough for an admin to read why, then the reclaim
// loop deletes it (SweepJobs).
const JobKeep = 7 * 24 * time.Hour

// CancelJob stops the running job of pool namespace/name (admins only,
// audited). The job's record says it was cancelled at once; the replica
// running it stops at its next write (within a renewal, jobRenew), as it
// would when another replica took the job over, and no replica resumes
// it. What the job did stays: clones under way go on and make their
// members, each carrying the pool's definition.
func (s *Service) CancelJob(ctx context.Context, id Identity, namespace, name string) (Job, error) {
	if err := requireAdmin(id); err != nil {
		return Job{}, err
	}
	ref := jobRef(namespace, name)
	// The job's replica renews its Lease every few seconds: a cancel that
	// loses the compare-and-swap reads it again.
	for attempt := 0; ; attempt++ {
		l, err := s.leases.Get(ctx, ref)
		if errors.Is(err, ErrNotFound) {
			return Job{}, Errorf(ENotFound, "List the jobs with GET /api/vdi/jobs.", "Pool %s/%s has no job.", namespace, name)
		} else if err != nil {
			return Job{}, unavailable(err)
		}
		rec, err := recordOf(l)
		if err != nil {
			return Job{}, &Error{Code: EInternal, Err: err, Msg: "The pool's job cannot be read.", Hint: "Look at the portal's log."}
		}
		if rec.State != JobRunning {
			return Job{}, Errorf(EConflict, "Nothing to cancel.", "The job of pool %s/%s is %s already.", namespace, name, rec.State)
		}
		rec.State, rec.Updated = JobCancelled, s.now()
		rec.Error = "Cancelled by " + id.Login + "."
		rec.Hint = cancelHint(rec.Kind)
		want := *l
		if err := rec.write(&want); err != nil {
			return Job{}, err
		}
		_, err = s.leases.Update(ctx, &want)
		if errors.Is(err, ErrConflict) && attempt < 3 {
			continue
		} else if errors.Is(err, ErrConflict) {
			return Job{}, Errorf(EConflict, "Try again.", "The job of pool %s/%s changed while it was being cancelled.", namespace, name)
		} else if err != nil {
			return Job{}, unavailable(err)
		}
		s.jobsMu.Lock()
		if j := s.jobsRunning[namespace+"/"+name]; j != nil && j.rec.ID == rec.ID {
			j.lost() // here: stop now rather than at the next renewal
		}
		s.jobsMu.Unlock()
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "job-cancel", Namespace: namespace, Target: name,
			Detail: "job " + rec.ID + " (" + string(rec.Kind) + ", " + rec.Progress + ")"})
		s.log.Info("job cancelled", "job", rec.ID, "kind", rec.Kind, "pool", namespace+"/"+name, "by", id.Login)
		return rec.Job, nil
	}
}

// cancelHint says what a cancelled job of kind leaves behind.
func cancelHint(kind JobKind) string {
	switch kind {
	case JobShrink:
		return "Desktops removed so far stay removed; resize the pool again to go on."
	case JobRecreate:
		return "A clone under way goes on and makes the desktop; if the desktop is missing, recreate it again or resize the pool."
	}
	return "Clones under way go on and make their desktops; resize the pool to make any that are missing."
}

// SweepJobs deletes the records of jobs that ended more than JobKeep ago;
// the reclaim loop calls it. It returns how many it deleted.
func (s *Service) SweepJobs(ctx context.Context) (int, error) {
	recs, err := s.jobRecords(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.rec.State == JobRunning || s.now().Sub(r.rec.Updated) < JobKeep {
			continue
		}
		// The Lease as read: a job started on the pool meanwhile is kept.
		if err := s.leases.Delete(ctx, r.lease); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
			return n, unavailable(err)
		} else if err == nil {
			n++
		}
	}
	return n, nil
}
