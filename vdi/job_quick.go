package vdi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Work a backend does at once (a pool declared in one object, a CT
// member's fresh Pod, a local pool's rows and desktops: ErrNotAJob, or a
// backend that is no PoolGrower) is usually quick, yet may wait on
// something slow — a Pod's grace, a desktop's stop — and must never be
// cut half-way by a client or gateway that gives up. So it runs as a job
// too, detached from the request, and the request waits for it only up to
// QuickWork: work done by then answers as it always did; longer work
// answers with its job, followed as a clone's is.

// QuickWork bounds how long a request waits for work done at once before
// it answers with the job that goes on doing it: well within a gateway's
// request timeout (30 s in deploy/overlays/gateway).
const QuickWork = 5 * time.Second

// startQuick runs rec, work the backend does at once, as a job (startJob),
// and waits for its end up to QuickWork or until ctx (the request's) ends.
// Ended in time, it returns no job and the work's error, and the job's
// record goes (forgetJob); else the job, left running, and the channel
// its end is sent on.
func (s *Service) startQuick(ctx context.Context, rec jobRecord) (*Job, <-chan error, error) {
	job, done, err := s.startJob(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	t := time.NewTimer(QuickWork)
	defer t.Stop()
	select {
	case err := <-done:
		s.forgetJob(context.WithoutCancel(ctx), job)
		return nil, nil, err
	case <-t.C:
	case <-ctx.Done():
	}
	return &job, done, nil
}

// forgetJob deletes the record of job, which ended while its request
// waited: the answer said how it went, and the pool keeps no job line.
func (s *Service) forgetJob(ctx context.Context, job Job) {
	l, err := s.leases.Get(ctx, jobRef(job.Namespace, job.Pool))
	if err != nil {
		return
	}
	if rec, err := recordOf(l); err != nil || rec.ID != job.ID {
		return // another job of the pool started meanwhile
	}
	if err := s.leases.Delete(ctx, l); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
		s.log.Warn("delete a quick job's record", "job", job.ID, "pool", job.Namespace+"/"+job.Pool, "err", err)
	}
}

// quickWork carries out rec, work the backend does at once (rec has no
// Growth). A create taken over from a portal that stopped finds the pool
// made already: it is done.
func (s *Service) quickWork(ctx context.Context, rec jobRecord, progress func(Progress)) error {
	pa, ok := s.backend.(PoolAdmin)
	switch {
	case rec.Kind == JobRecreate:
		progress(Progress{Total: 1, Text: "recreating " + rec.Member})
		ref := Ref{Namespace: rec.Namespace, Name: rec.Member}
		if err := s.backend.Recreate(ctx, ref); err != nil {
			return &Error{Code: EUnavailable, Err: err, Msg: "Desktop " + ref.String() + " could not be recreated.", Hint: "Look at the portal's log, then try again."}
		}
		return nil
	case !ok:
		return Errorf(EInvalid, "Manage this backend's pools where they are declared (e.g. with kubectl).", "This portal cannot create, resize or delete pools.")
	case rec.Kind == JobCreate && rec.Create != nil:
		progress(Progress{Total: 1, Text: "creating the pool"})
		if rec.Resumed {
			if _, err := s.backend.Pool(ctx, rec.Namespace, rec.Pool); err == nil {
				return nil
			}
		}
		return pa.CreatePool(ctx, *rec.Create)
	case rec.Kind == JobGrow:
		progress(Progress{Total: 1, Text: fmt.Sprintf("resizing to %d desktops", rec.Size)})
		held, err := s.held(ctx, rec.Namespace, rec.Pool)
		if err != nil {
			return err
		}
		return pa.ResizePool(ctx, rec.Namespace, rec.Pool, rec.Size, func(m string) bool { return held[m] != nil })
	}
	return Errorf(EInternal, "Look at the portal's log.", "Job %s (%s) has nothing to do.", rec.ID, rec.Kind)
}
