package vdi_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// growerBackend is a narrow stand-in for a backend whose growing is long:
// Grow makes its members only when the test lets it (grown), or fails
// with fail.
type growerBackend struct {
	*poolBackend
	mu    sync.Mutex
	grows [][]string // the members each Grow was asked for
	gate  chan struct{}
	fail  error
}

func (b *growerBackend) CreatePool(context.Context, vdi.Pool) error { return nil }
func (b *growerBackend) ResizePool(context.Context, string, string, int, func(string) bool) error {
	return nil
}
func (b *growerBackend) SetPolicy(context.Context, string, string, vdi.Policy) error { return nil }
func (b *growerBackend) SetAccess(context.Context, string, string, vdi.Access, vdi.Limits) error {
	return nil
}
func (b *growerBackend) SetStandby(context.Context, string, string, vdi.Standby, vdi.StandbySchedule) error {
	return nil
}
func (b *growerBackend) DeletePool(context.Context, string, string) error { return nil }
func (b *growerBackend) PlanCreate(_ context.Context, p vdi.Pool) (vdi.Growth, error) {
	return vdi.Growth{Pool: p, Members: []string{p.Name + "-1", p.Name + "-2"}}, nil
}
func (b *growerBackend) PlanResize(_ context.Context, _, name string, size int) (vdi.Growth, error) {
	g := vdi.Growth{Pool: b.pool}
	for i := len(b.names) + 1; i <= size; i++ {
		g.Members = append(g.Members, name+"-"+string(rune('0'+i)))
	}
	return g, nil
}
func (b *growerBackend) PlanRecreate(context.Context, vdi.Ref) (vdi.Growth, error) {
	return vdi.Growth{}, vdi.ErrNotAJob
}
func (b *growerBackend) Grow(ctx context.Context, g vdi.Growth, progress func(vdi.Progress)) error {
	b.mu.Lock()
	b.grows = append(b.grows, g.Members)
	gate, fail := b.gate, b.fail
	b.mu.Unlock()
	progress(vdi.Progress{Total: len(g.Members), Text: "cloning 0 of 2"})
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return fail
}

// TestPoolJobs runs pool jobs on the SQLite claim store, two portals
// sharing it.
func TestPoolJobs(t *testing.T) {
	ctx := context.Background()
	root := vdi.Identity{Login: "root", Admin: true}
	now := time.Unix(1_800_000_000, 0)
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &growerBackend{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"), gate: make(chan struct{})}
	portal := func() *vdi.Service {
		s := vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db, Now: func() time.Time { return now }})
		t.Cleanup(s.StopJobs)
		return s
	}
	first, second := portal(), portal()
	job, _, err := first.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(4)})
	if err != nil || job == nil || job.Kind != vdi.JobGrow || job.Total != 2 {
		t.Fatalf("grow: %+v, %v; want a grow job of 2", job, err)
	}

	t.Run("OnlyAdminsSeeJobs", func(t *testing.T) {
		if _, err := first.Job(ctx, vdi.Identity{Login: "alice"}, "local", "demo"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice reads the job: %v; want EForbidden", err)
		}
		if _, err := first.Jobs(ctx, vdi.Identity{Login: "alice"}); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice lists the jobs: %v; want EForbidden", err)
		}
	})

	t.Run("OneJobAPool", func(t *testing.T) {
		if _, _, err := second.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(5)}); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("a second grow meanwhile: %v; want EConflict", err)
		}
		if err := second.DeletePool(ctx, root, "local", "demo"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("deleting the pool meanwhile: %v; want EConflict", err)
		}
	})

	t.Run("AnotherPortalFinishes", func(t *testing.T) {
		first.StopJobs() // the portal dies mid-job
		if n, err := second.ResumeJobs(ctx); err != nil || n != 0 {
			t.Fatalf("resume while the job's Lease holds: %d, %v; want none taken", n, err)
		}
		now = now.Add(time.Minute) // its Lease runs out unrenewed
		if n, err := second.ResumeJobs(ctx); err != nil || n != 1 {
			t.Fatalf("resume after the Lease ran out: %d, %v; want the job taken over", n, err)
		}
		close(b.gate)
		var j vdi.Job
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if j, err = second.Job(ctx, root, "local", "demo"); err != nil || j.State != vdi.JobRunning || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || j.ID != job.ID || j.State != vdi.JobDone || j.Done != 2 {
			t.Fatalf("the job: %+v, %v; want job %s done, 2 of 2", j, err, job.ID)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.grows) != 2 || !slices.Equal(b.grows[0], b.grows[1]) {
			t.Errorf("Grow was asked for %v; want the same members twice (started, then finished by the other portal)", b.grows)
		}
	})

	t.Run("FailedJobSaysWhy", func(t *testing.T) {
		b.mu.Lock()
		b.fail = vdi.Errorf(vdi.EUnavailable, "Check the storage.", "Cloning demo-3 failed.")
		b.mu.Unlock()
		_, done, err := second.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(4)})
		if err != nil {
			t.Fatal(err)
		}
		<-done
		j, err := second.Job(ctx, root, "local", "demo")
		if err != nil || j.State != vdi.JobFailed || j.Error != "Cloning demo-3 failed." || j.Hint != "Check the storage." {
			t.Fatalf("the failed job: %+v, %v; want failed with the backend's message and hint", j, err)
		}
		pools, err := second.Pools(ctx, root)
		if err != nil || len(pools) != 1 || pools[0].Job == nil || pools[0].Job.State != vdi.JobFailed {
			t.Errorf("the pool list: %+v, %v; want the pool with its failed job", pools, err)
		}
		if pools, _ := second.Pools(ctx, vdi.Identity{Login: "alice"}); len(pools) == 1 && pools[0].Job != nil {
			t.Errorf("alice's pool list shows the job %+v; want it for admins only", pools[0].Job)
		}
	})

	// waitDone waits for a job's work to end on its portal.
	waitDone := func(t *testing.T, done <-chan error) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("the cancelled job's work is still running after 2 min")
		}
	}

	t.Run("CancelStopsTheJob", func(t *testing.T) {
		b.mu.Lock()
		b.fail, b.gate = nil, make(chan struct{}) // Grow runs until stopped
		b.mu.Unlock()
		job, done, err := second.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(5)})
		if err != nil || job == nil {
			t.Fatalf("grow: %+v, %v; want a job", job, err)
		}
		if _, err := first.CancelJob(ctx, vdi.Identity{Login: "alice"}, "local", "demo"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice cancels the job: %v; want EForbidden", err)
		}
		// The other portal cancels: the job's own portal stops at its
		// next renewal, when its compare-and-swap loses.
		c, err := first.CancelJob(ctx, root, "local", "demo")
		if err != nil || c.ID != job.ID || c.State != vdi.JobCancelled {
			t.Fatalf("cancel: %+v, %v; want job %s cancelled", c, err, job.ID)
		}
		waitDone(t, done)
		j, err := second.Job(ctx, root, "local", "demo")
		if err != nil || j.State != vdi.JobCancelled || j.Error != "Cancelled by root." || j.Hint == "" {
			t.Fatalf("the job after its cancel: %+v, %v; want cancelled by root, with a hint", j, err)
		}
		if _, err := first.CancelJob(ctx, root, "local", "demo"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("cancel again: %v; want EConflict (nothing to cancel)", err)
		}
		now = now.Add(time.Minute) // no portal resumes a cancelled job
		if n, err := first.ResumeJobs(ctx); err != nil || n != 0 {
			t.Errorf("resume after the cancel: %d, %v; want none taken", n, err)
		}
		audit, err := db.AuditHistory(ctx, vdi.HistoryFilter{User: "root", Targets: []string{"demo"}})
		if err != nil || !slices.ContainsFunc(audit, func(e vdi.AuditEntry) bool { return e.Action == "job-cancel" }) {
			t.Errorf("audit %+v, %v; want root's job-cancel", audit, err)
		}
		// On the job's own portal the work stops at once, and the pool
		// takes a new job.
		_, done, err = second.UpdatePoolJob(ctx, root, "local", "demo", vdi.PoolUpdate{Size: new(5)})
		if err != nil {
			t.Fatalf("a new job after the cancel: %v", err)
		}
		if _, err := second.CancelJob(ctx, root, "local", "demo"); err != nil {
			t.Fatalf("cancel on the job's own portal: %v", err)
		}
		waitDone(t, done)
	})

	t.Run("EndedJobsSweptByAge", func(t *testing.T) {
		if n, err := first.SweepJobs(ctx); err != nil || n != 0 {
			t.Fatalf("sweep a job that just ended: %d, %v; want it kept", n, err)
		}
		now = now.Add(vdi.JobKeep + time.Hour)
		if n, err := first.SweepJobs(ctx); err != nil || n != 1 {
			t.Fatalf("sweep a job that ended %v ago: %d, %v; want it deleted", vdi.JobKeep, n, err)
		}
		if _, err := first.Job(ctx, root, "local", "demo"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("the swept job: %v; want ENotFound", err)
		}
	})
}
