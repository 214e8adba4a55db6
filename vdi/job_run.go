package vdi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// startJob records rec as its pool's running job, held by this portal,
// and runs it detached from ctx (the request's); its end is sent on done.
// It fails with EConflict while another job of the pool runs or waits to
// be finished.
func (s *Service) startJob(ctx context.Context, rec jobRecord) (_ Job, done <-chan error, _ error) {
	now := s.now()
	rec.ID, rec.State, rec.Started, rec.Updated = rand.Text()[:12], JobRunning, now, now
	ref := jobRef(rec.Namespace, rec.Pool)
	want := &Lease{Namespace: ref.Namespace, Member: ref.Name, Pool: jobPool, Holder: instanceID,
		AcquireTime: now, RenewTime: now, Duration: jobLease}
	if err := rec.write(want); err != nil {
		return Job{}, nil, err
	}
	l, err := s.leases.Create(ctx, want)
	if errors.Is(err, ErrAlreadyExists) {
		l, err = s.replaceJob(ctx, ref, want)
	} else if err != nil {
		err = unavailable(err)
	}
	if err != nil {
		return Job{}, nil, err
	}
	return rec.Job, s.runJob(l, rec), nil
}

// waitJob waits for a job that startJob left running to end, and returns
// its error; with no job, err.
func (s *Service) waitJob(ctx context.Context, job *Job, done <-chan error, err error) error {
	if err != nil || job == nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// replaceJob writes want over the pool's finished job.
func (s *Service) replaceJob(ctx context.Context, ref Ref, want *Lease) (*Lease, error) {
	old, err := s.leases.Get(ctx, ref)
	if err != nil {
		return nil, unavailable(err)
	}
	if prev, err := recordOf(old); err == nil && prev.State == JobRunning {
		how := "Wait for it to finish"
		if old.Expired(s.now()) {
			how = "Its portal stopped; the reclaim loop finishes it within a minute. Wait for that"
		}
		return nil, prev.busy(how + " (GET /api/vdi/pools/" + prev.Namespace + "/" + prev.Pool + "/job), then try again.")
	}
	want.ResourceVersion = old.ResourceVersion
	l, err := s.leases.Update(ctx, want)
	if errors.Is(err, ErrConflict) {
		return nil, Errorf(EConflict, "Look at the pool's job, then try again.", "Another job of pool %s/%s started meanwhile.",
			ref.Namespace, strings.TrimSuffix(want.Member, jobSuffix))
	} else if err != nil {
		return nil, unavailable(err)
	}
	return l, nil
}

// job is one running job on this portal: its Lease, renewed and written
// one write at a time.
type job struct {
	s   *Service
	mu  sync.Mutex
	l   *Lease
	rec jobRecord
	// lost ends the work when another replica took the job over.
	lost context.CancelFunc
}

// save writes the record and renews the Lease; losing the Lease (a
// conflict: another replica took the job, deeming this one dead) stops
// the work.
func (j *job) save(ctx context.Context, change func(*jobRecord)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if change != nil {
		change(&j.rec)
	}
	now := j.s.now()
	j.rec.Updated = now
	l := *j.l
	l.RenewTime, l.Holder = now, instanceID
	if err := j.rec.write(&l); err != nil {
		j.s.log.Error("job", "job", j.rec.ID, "err", err)
		return
	}
	got, err := j.s.leases.Update(ctx, &l)
	switch {
	case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
		j.s.log.Warn("job taken over by another portal or cancelled", "job", j.rec.ID, "pool", j.rec.Namespace+"/"+j.rec.Pool)
		j.lost()
	case err != nil:
		j.s.log.Warn("write job", "job", j.rec.ID, "err", err) // the next renewal tries again
	default:
		j.l = got
	}
}

// runJob runs rec's work in its own goroutine until it ends, renewing
// the job's Lease l, and sends the work's end on the channel it returns.
// StopJobs ends it without a word, as a replica's death would: another
// replica finishes it.
func (s *Service) runJob(l *Lease, rec jobRecord) <-chan error {
	done := make(chan error, 1)
	ctx, lost := context.WithCancel(s.jobCtx)
	j := &job{s: s, l: l, rec: rec, lost: lost}
	key := rec.Namespace + "/" + rec.Pool
	s.jobsMu.Lock()
	s.jobsRunning[key] = j
	s.jobsMu.Unlock()
	s.jobsWG.Add(1)
	go func() {
		defer s.jobsWG.Done()
		defer func() {
			s.jobsMu.Lock()
			if s.jobsRunning[key] == j {
				delete(s.jobsRunning, key)
			}
			s.jobsMu.Unlock()
		}()
		defer lost()
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			t := time.NewTicker(jobRenew)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					j.save(ctx, nil)
				}
			}
		}()
		err := s.jobWork(ctx, rec, func(p Progress) {
			j.save(ctx, func(r *jobRecord) { r.Done, r.Total, r.Progress = p.Done, p.Total, p.Text })
		})
		stopped := ctx.Err() != nil
		lost()
		<-renewed
		if stopped {
			done <- errors.Join(err, context.Cause(ctx))
			return // this portal stops, or another replica took the job over
		}
		defer func() { done <- err }() // once the record says how it ended
		j.save(s.jobCtx, func(r *jobRecord) {
			if err == nil {
				r.State, r.Progress, r.Done = JobDone, "done", r.Total
				return
			}
			r.State = JobFailed
			r.Error, r.Hint = jobError(err)
		})
		if err != nil {
			s.log.Warn("job failed", "job", rec.ID, "kind", rec.Kind, "pool", key, "err", err)
		} else {
			s.log.Info("job done", "job", rec.ID, "kind", rec.Kind, "pool", key)
			s.kickStandby()
		}
	}()
	return done
}

// jobWork carries out rec.
func (s *Service) jobWork(ctx context.Context, rec jobRecord, progress func(Progress)) error {
	switch {
	case rec.Growth == nil && rec.Kind != JobShrink:
		return s.quickWork(ctx, rec, progress)
	}
	switch rec.Kind {
	case JobCreate, JobGrow, JobRecreate:
		pg, ok := s.backend.(PoolGrower)
		if !ok || rec.Growth == nil {
			return fmt.Errorf("vdi: job %s (%s) cannot be run by this backend", rec.ID, rec.Kind)
		}
		if rec.Kind == JobRecreate {
			return s.recreateWork(ctx, pg, rec, progress)
		}
		return pg.Grow(ctx, *rec.Growth, progress)
	case JobShrink:
		pa, ok := s.backend.(PoolAdmin)
		if !ok {
			return fmt.Errorf("vdi: job %s (%s) cannot be run by this backend", rec.ID, rec.Kind)
		}
		progress(Progress{Total: 1, Text: fmt.Sprintf("removing desktops down to %d", rec.Size)})
		held, err := s.held(ctx, rec.Namespace, rec.Pool)
		if err != nil {
			return err
		}
		return pa.ResizePool(ctx, rec.Namespace, rec.Pool, rec.Size, func(m string) bool { return held[m] != nil })
	}
	return fmt.Errorf("vdi: job %s has an unknown kind %q", rec.ID, rec.Kind)
}

// StopJobs stops this portal's jobs without a word, as its death would:
// their Leases run out and another replica's reclaim loop finishes them.
// It returns when they have stopped.
func (s *Service) StopJobs() {
	s.stopJobs()
	s.jobsWG.Wait()
}

// ResumeJobs takes over the running jobs whose portal stopped renewing
// them and finishes them here; the reclaim loop calls it. It returns how
// many it took over.
func (s *Service) ResumeJobs(ctx context.Context) (int, error) {
	recs, err := s.jobRecords(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	now := s.now()
	for _, r := range recs {
		key := r.rec.Namespace + "/" + r.rec.Pool
		s.jobsMu.Lock()
		mine := s.jobsRunning[key] != nil
		s.jobsMu.Unlock()
		if r.rec.State != JobRunning || mine || !r.lease.Expired(now) {
			continue
		}
		l := *r.lease
		l.Holder, l.RenewTime = instanceID, now
		got, err := s.leases.Update(ctx, &l)
		if errors.Is(err, ErrConflict) {
			continue // another replica took it
		} else if err != nil {
			return n, unavailable(err)
		}
		s.log.Info("finishing a job another portal left", "job", r.rec.ID, "kind", r.rec.Kind, "pool", key, "progress", r.rec.Progress)
		r.rec.Resumed = true
		s.runJob(got, r.rec)
		n++
	}
	return n, nil
}

// jobError is what a failed job tells the admin: a user's error as it is,
// anything else as a failure to look up in the log (its cause may name
// internals).
func jobError(err error) (msg, hint string) {
	var e *Error
	if errors.As(err, &e) && e.Code != EInternal {
		return e.Msg, e.Hint
	}
	return "The job failed.", "Look at the portal's log, then try again."
}

// recreateWork makes rec.Member fresh. A recreate another replica left
// is finished from the growth recorded at the start: the old member, if
// it is still there (Growth.Replaces), is made fresh; if it was deleted
// already, it is made (its clone under way taken over).
func (s *Service) recreateWork(ctx context.Context, pg PoolGrower, rec jobRecord, progress func(Progress)) error {
	if rec.Resumed {
		return pg.Grow(ctx, *rec.Growth, progress)
	}
	progress(Progress{Total: 1, Text: "recreating " + rec.Member})
	ref := Ref{Namespace: rec.Namespace, Name: rec.Member}
	if err := s.backend.Recreate(ctx, ref); err != nil {
		if ErrorCode(err) != EInternal {
			return err
		}
		return &Error{Code: EUnavailable, Err: err, Msg: "Desktop " + ref.String() + " could not be recreated.", Hint: "Look at the portal's log, then try again."}
	}
	return nil
}

// busy refuses other work on the job's pool while the job runs.
func (rec jobRecord) busy(hint string) error {
	return Errorf(EConflict, hint, "Pool %s/%s is busy: %s by %s, %s.", rec.Namespace, rec.Pool, rec.Kind, rec.By, rec.Progress)
}
