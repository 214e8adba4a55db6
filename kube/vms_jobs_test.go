package kube_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// followJob reads the pool's job until it is no longer running, and
// returns it with every progress line seen on the way.
func followJob(t *testing.T, s *kubeVirtSetup, svc *vdi.Service, pool, id string) (vdi.Job, []string) {
	t.Helper()
	root := vdi.Identity{Login: "root", Admin: true}
	var seen []string
	var job vdi.Job
	s.waitFor(t, 5*time.Minute, "job "+id+" on pool "+pool+" to end", func() (bool, error) {
		var err error
		job, err = svc.Job(s.ctx, root, s.ns, pool)
		if err != nil {
			return false, err
		}
		if job.ID != id {
			t.Fatalf("pool %s's job is %s; want %s", pool, job.ID, id)
		}
		if len(seen) == 0 || seen[len(seen)-1] != job.Progress {
			seen = append(seen, job.Progress)
		}
		return job.State != vdi.JobRunning, nil
	})
	return job, seen
}

// testKubeVirtJobs: pool work outlives the request that asked for it and
// the replica that ran it, on KubeVirt's own controllers with disks that
// bind as late as cloud storage's.
func testKubeVirtJobs(t *testing.T, s *kubeVirtSetup) {
	golden := s.golden(t, "golden", nil, "golden-root")
	s.disk(t, "golden-root", testcluster.StorageClassDefault, golden)
	s.csi.SetDelays(4*time.Second, 2*time.Second)
	t.Cleanup(func() { s.csi.SetDelays(0, 0) })
	leases := mustLeases(t, s.c.PortalServiceAccount(t))
	first := newService(s.vms, leases)
	t.Cleanup(first.StopJobs)
	root := vdi.Identity{Login: "root", Admin: true}
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	pool := vdi.Pool{Namespace: s.ns, Name: "desk", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 6,
		Access: vdi.Access{Users: []string{"alice"}}}
	want := func(n int) []string {
		var out []string
		for i := 1; i <= n; i++ {
			out = append(out, "desk-"+strconv.Itoa(i))
		}
		slices.Sort(out)
		return out
	}
	// mustOwnMembers: the pool has members 1..n, each alice's (as JSON
	// once the reclaim loop or the job has written it).
	mustOwnMembers := func(t *testing.T, n int) {
		t.Helper()
		if got := s.members(t, "desk"); !slices.Equal(got, want(n)) {
			t.Fatalf("members %v; want %v", got, want(n))
		}
		for _, m := range want(n) {
			s.waitFor(t, time.Minute, m+" carrying alice's access", func() (bool, error) {
				a := s.vm(t, m).Annotations[kube.AnnotationAccess]
				return strings.Contains(a, `"alice"`), fmt.Errorf("%s=%q", kube.AnnotationAccess, a)
			})
		}
		p, err := s.vms.Pool(s.ctx, s.ns, "desk")
		if err != nil || !p.Allows(alice) || p.Allows(bob) {
			t.Fatalf("pool desk %+v, %v; want alice's only", p.Access, err)
		}
	}

	t.Run("ClientGivesUp", func(t *testing.T) {
		// The request's context ends as soon as it is answered, as with a
		// client (or a gateway) that gives up: the job goes on. (A fixed
		// 1 s would also cut the checks before the answer on a loaded
		// machine.)
		rctx, cancel := context.WithCancel(s.ctx)
		job, _, err := first.CreatePoolJob(rctx, root, pool)
		cancel()
		if err != nil {
			t.Fatalf("create as a job: %v", err)
		}
		if job == nil || job.State != vdi.JobRunning || job.Kind != vdi.JobCreate || job.Total != 6 {
			t.Fatalf("job %+v; want a running create of 6", job)
		}
		if _, err := first.Job(s.ctx, alice, s.ns, "desk"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice reads the job: %v; want EForbidden", err)
		}
		end, seen := followJob(t, s, first, "desk", job.ID)
		t.Logf("progress seen: %q", seen)
		if end.State != vdi.JobDone || end.Done != 6 || end.Error != "" {
			t.Fatalf("job ended %+v; want done, 6 of 6", end)
		}
		cloning := regexp.MustCompile(`^cloning [0-5] of 6 \(`)
		if !slices.ContainsFunc(seen, cloning.MatchString) {
			t.Errorf("progress seen %q; want a line like \"cloning 3 of 6 (…)\" while it ran", seen)
		}
		mustOwnMembers(t, 6)
	})

	t.Run("ReplicaRestartedMidJob", func(t *testing.T) {
		job, _, err := first.UpdatePoolJob(s.ctx, root, s.ns, "desk", vdi.PoolUpdate{Size: new(10)})
		if err != nil || job == nil || job.Kind != vdi.JobGrow || job.Total != 4 {
			t.Fatalf("grow as a job: %+v, %v; want a grow of 4", job, err)
		}
		second := newService(s.vms, leases)
		t.Cleanup(second.StopJobs)
		if _, _, err := second.UpdatePoolJob(s.ctx, root, s.ns, "desk", vdi.PoolUpdate{Size: new(12)}); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("a second admin grows the pool meanwhile: %v; want EConflict (one job per pool)", err)
		}
		s.waitFor(t, 2*time.Minute, "the grow's clones under way", func() (bool, error) {
			j, err := first.Job(s.ctx, root, s.ns, "desk")
			return err == nil && strings.Contains(j.Progress, "restoring"), err
		})
		first.StopJobs() // the replica dies: no word, no renewal
		if j, err := first.Job(s.ctx, root, s.ns, "desk"); err != nil || j.State != vdi.JobRunning {
			t.Fatalf("job after its replica died: %+v, %v; want still running", j, err)
		}
		// The other replica's reclaim loop takes the job over once its
		// Lease runs out, and repairs what the first left half-written.
		rctx, stop := context.WithCancel(s.ctx)
		defer stop()
		go second.RunReclaimer(rctx, time.Second)
		end, seen := followJob(t, s, second, "desk", job.ID)
		t.Logf("progress seen after the takeover: %q", seen)
		if end.State != vdi.JobDone || end.Done != 4 {
			t.Fatalf("job ended %+v; want done, 4 of 4", end)
		}
		mustOwnMembers(t, 10)
	})

	t.Run("ShrinkIsAJob", func(t *testing.T) {
		second := newService(s.vms, leases)
		t.Cleanup(second.StopJobs)
		job, _, err := second.UpdatePoolJob(s.ctx, root, s.ns, "desk", vdi.PoolUpdate{Size: new(7)})
		if err != nil || job == nil || job.Kind != vdi.JobShrink {
			t.Fatalf("shrink: %+v, %v; want a shrink job", job, err)
		}
		if end, _ := followJob(t, s, second, "desk", job.ID); end.State != vdi.JobDone {
			t.Fatalf("shrink ended %+v; want done", end)
		}
		mustOwnMembers(t, 7)
	})

	t.Run("TakeoverMidRecreate", func(t *testing.T) {
		// The golden VM changed, so the recreate first takes a new
		// snapshot (2 s late on this storage): its replica dies then,
		// before the old VM was deleted. The replica that takes the job
		// over must make the member fresh, not report the old one done.
		if err := testcluster.Update(s.ctx, s.admin, s.vm(t, "golden"), func(g *kubevirtv1.VirtualMachine) {
			if g.Spec.Template.ObjectMeta.Annotations == nil {
				g.Spec.Template.ObjectMeta.Annotations = map[string]string{}
			}
			g.Spec.Template.ObjectMeta.Annotations["corral.dev/test-revision"] = "2"
		}); err != nil {
			t.Fatalf("change the golden VM: %v", err)
		}
		n := len(s.members(t, "desk"))
		old := s.vm(t, "desk-6").UID
		third := newService(s.vms, leases)
		job, _, err := third.RecreateJob(s.ctx, root, vdi.Ref{Namespace: s.ns, Name: "desk-6"})
		if err != nil || job == nil || job.Kind != vdi.JobRecreate {
			t.Fatalf("recreate: %+v, %v; want a recreate job", job, err)
		}
		third.StopJobs() // the replica dies mid-snapshot
		if got := s.vm(t, "desk-6").UID; got != old {
			t.Fatalf("desk-6 was deleted before the takeover (uid %s, was %s): the test needs the replica to die first", got, old)
		}
		second := newService(s.vms, leases)
		t.Cleanup(second.StopJobs)
		rctx, stop := context.WithCancel(s.ctx)
		defer stop()
		go second.RunReclaimer(rctx, time.Second)
		end, seen := followJob(t, s, second, "desk", job.ID)
		t.Logf("progress seen after the takeover: %q", seen)
		if end.State != vdi.JobDone {
			t.Fatalf("recreate ended %+v; want done", end)
		}
		if got := s.vm(t, "desk-6").UID; got == old {
			t.Fatalf("desk-6 is still the VM it was (uid %s) after a recreate reported done", got)
		}
		mustOwnMembers(t, n)
	})

	t.Run("ReplicaDiesMidReset", func(t *testing.T) { testResetTakeover(t, s, leases, mustOwnMembers) })

	t.Run("ClaimAnswersAtOnce", func(t *testing.T) {
		// No node runs VMs in this cluster (the Node subtest adds one):
		// a cold member is asked to start and never runs. The claim is
		// answered once its Lease is won, within a request's patience,
		// not after PowerTimeout.
		rctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		svc := newService(s.vms, leases)
		d, err := svc.ClaimStarting(rctx, alice, s.ns, "desk")
		if err != nil || d.Power != vdi.PowerStarting || d.Holder != "alice" {
			t.Fatalf("alice's claim of a cold member: %+v, %v; want it hers, starting", d, err)
		}
		l, err := leases.Get(s.ctx, d.Ref())
		if err != nil || l.Holder != "alice" {
			t.Fatalf("the claim's Lease: %+v, %v; want alice's", l, err)
		}
		vm := s.vm(t, d.Name)
		if rs := vm.Spec.RunStrategy; rs == nil || *rs != kubevirtv1.RunStrategyAlways {
			t.Errorf("%s's run strategy %v; want Always (asked to start)", d.Name, rs)
		}
		if again, err := svc.ClaimStarting(rctx, alice, s.ns, "desk"); err != nil || again.Name != d.Name {
			t.Errorf("alice asks again: %+v, %v; want %s again", again, err, d.Name)
		}
		// An admin's assignment answers the same way.
		other := "desk-1"
		if d.Name == other {
			other = "desk-2"
		}
		a, err := svc.Assign(rctx, root, vdi.Ref{Namespace: s.ns, Name: other}, "alice")
		if err != nil || a.Power != vdi.PowerStarting || a.Holder != "alice" {
			t.Fatalf("assign cold %s to alice: %+v, %v; want it hers, starting", other, a, err)
		}
		// So does the explicit start of a stopped desktop.
		third := ""
		for i := 1; third == ""; i++ {
			if n := "desk-" + strconv.Itoa(i); n != d.Name && n != other {
				third = n
			}
		}
		if err := svc.Start(rctx, root, vdi.Ref{Namespace: s.ns, Name: third}); err != nil {
			t.Fatalf("start cold %s: %v; want it asked to start at once", third, err)
		}
		if rs := s.vm(t, third).Spec.RunStrategy; rs == nil || *rs != kubevirtv1.RunStrategyAlways {
			t.Errorf("%s's run strategy %v; want Always (asked to start)", third, rs)
		}
	})
}
