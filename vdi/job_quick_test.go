package vdi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// quickBackend is a backend whose pool work is done at once (no
// PoolGrower), as a CT pool's or the local backend's: ResizePool waits
// for gate, says on entered that it began, and ends with fail; cut says
// whether its context ended under it.
type quickBackend struct {
	*poolBackend
	gate    chan struct{}
	entered chan struct{}
	fail    error
	cut     chan bool
}

func (b *quickBackend) CreatePool(context.Context, vdi.Pool) error { return nil }
func (b *quickBackend) ResizePool(ctx context.Context, _, _ string, _ int, _ func(string) bool) error {
	b.entered <- struct{}{}
	select {
	case <-b.gate:
		b.cut <- false
		return b.fail
	case <-ctx.Done():
		b.cut <- true
		return ctx.Err()
	}
}
func (b *quickBackend) SetPolicy(context.Context, string, string, vdi.Policy) error { return nil }
func (b *quickBackend) SetAccess(context.Context, string, string, vdi.Access, vdi.Limits) error {
	return nil
}
func (b *quickBackend) SetStandby(context.Context, string, string, vdi.Standby, vdi.StandbySchedule) error {
	return nil
}
func (b *quickBackend) DeletePool(context.Context, string, string) error { return nil }

// TestQuickWorkOutlivesItsRequest: work a backend does at once answers as
// it always did when it ends while the request waits (its error as it
// is, no job left), and goes on as a job when the client gives up first:
// the answer is the running job, the work's context is not cut, the
// resize is audited all the same, and the job ends done.
func TestQuickWorkOutlivesItsRequest(t *testing.T) {
	ctx := context.Background()
	root := vdi.Identity{Login: "root", Admin: true}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &quickBackend{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"),
		gate: make(chan struct{}), entered: make(chan struct{}, 1), cut: make(chan bool, 1)}
	s := vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db})
	t.Cleanup(s.StopJobs)

	t.Run("EndsInTime", func(t *testing.T) {
		b.fail = vdi.Errorf(vdi.EConflict, "Release some first.", "Pool demo has claimed desktops.")
		close(b.gate)
		job, _, err := s.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(1)})
		<-b.entered
		if job != nil || vdi.ErrorCode(err) != vdi.EConflict || err.Error() != "Pool demo has claimed desktops." {
			t.Errorf("a quick resize the backend refuses: %+v, %v; want its refusal as it is, no job", job, err)
		}
		if cut := <-b.cut; cut {
			t.Error("the quick resize's context ended under it")
		}
		if j, err := s.Job(ctx, root, "local", "demo"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("the pool's job after a quick resize: %+v, %v; want none left", j, err)
		}
	})

	t.Run("ClientGivesUp", func(t *testing.T) {
		b.gate, b.fail = make(chan struct{}), nil
		rctx, giveUp := context.WithCancel(ctx)
		type answer struct {
			job *vdi.Job
			err error
		}
		answered := make(chan answer, 1)
		go func() {
			job, _, err := s.UpdatePoolJob(rctx, root, "local", "demo", vdi.PoolUpdate{Size: new(1)})
			answered <- answer{job, err}
		}()
		<-b.entered
		giveUp()
		a := <-answered
		if a.err != nil || a.job == nil || a.job.State != vdi.JobRunning || a.job.Kind != vdi.JobShrink {
			t.Fatalf("a resize whose client gave up: %+v, %v; want its job, running", a.job, a.err)
		}
		close(b.gate)
		if cut := <-b.cut; cut {
			t.Error("the resize's context ended with its request's")
		}
		audit, err := db.AuditLog(ctx, 10)
		if err != nil || len(audit) != 1 || audit[0].Action != "pool-resize" {
			t.Errorf("audit after a resize whose client gave up: %+v, %v; want the one pool-resize", audit, err)
		}
		for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			j, err := s.Job(ctx, root, "local", "demo")
			if err == nil && j.State == vdi.JobDone {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the resize's job: %+v, %v; want done", j, err)
			}
		}
	})
}
