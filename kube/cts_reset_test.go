package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCTReleaseDetached: the release of a CT member answers once its claim
// is marked, while its Pod is still going (here a finalizer holds it, as
// a node that does not answer would); the member is listed as resetting
// meanwhile, held by nobody and claimed by nobody. The replica dies
// mid-reset; another's reclaim loop, once the mark is stale, makes the
// member fresh (a new Pod) and lets the claim go.
func TestCTReleaseDetached(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.configMap(t, "held", map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1", kube.CTKeyMode: string(vdi.ModeEphemeral)})
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	d, err := s.svc.Claim(ctx, alice, ns, "held")
	if err != nil || d.Power != vdi.PowerRunning {
		t.Fatalf("alice's claim: %+v, %v; want a running desktop", d, err)
	}
	ref := d.Ref()
	old := s.pod(t, ref.Name)
	const hold = "corral.test/hold"
	// The kubelet writes a Pod's status when it will: testcluster.Update
	// reads the Pod again when a write meets one.
	admin := s.c.AdminClient(t)
	setFinalizers := func(fs []string) {
		t.Helper()
		err := testcluster.Update(ctx, admin, old.DeepCopy(), func(pod *corev1.Pod) {
			if pod.UID != old.UID {
				t.Fatalf("alice's Pod %s is %s; want the one she claimed, %s", ref.Name, pod.UID, old.UID)
			}
			pod.Finalizers = fs
		})
		if err != nil {
			t.Fatalf("alice's Pod %s: %v; want the one she claimed", ref.Name, err)
		}
	}
	setFinalizers([]string{hold})
	t.Cleanup(func() {
		testcluster.Update(context.Background(), admin, old.DeepCopy(), func(pod *corev1.Pod) { pod.Finalizers = nil })
	})

	released := make(chan error, 1)
	go func() { released <- s.svc.Release(ctx, alice, ref, "") }()
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("alice's release: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("alice's release still waits for her Pod to go after 3 min; want it answered while the Pod goes")
	}
	// The reset has asked for the Pod's deletion (the finalizer holds it).
	eventually(t, time.Minute, func() string {
		if pod := s.pod(t, ref.Name); pod == nil || pod.DeletionTimestamp == nil {
			return "alice's Pod not being deleted after her release"
		}
		return ""
	})
	all, err := s.svc.Desktops(ctx, s.root, true)
	if err != nil || !resettingIn(all, ref) {
		t.Errorf("desktops while %s is reset: %+v, %v; want it resetting (release) with no holder", ref, all, err)
	}
	mine, err := s.svc.Desktops(ctx, alice, false)
	if err != nil || slices.ContainsFunc(mine, func(d vdi.Desktop) bool { return d.Namespace == ns }) {
		t.Errorf("alice's desktops while hers is reset: %+v, %v; want none in %s", mine, err, ns)
	}
	if got, err := s.svc.ClaimStarting(ctx, bob, ns, "held"); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("bob's claim while the only member is reset: %+v, %v; want EConflict (none free)", got, err)
	}

	s.svc.StopJobs() // the replica dies: no word, no renewal of the mark
	if l, err := s.leases.Get(ctx, ref); err != nil || l.Annotations[vdi.AnnotationReclaiming] == "" {
		t.Fatalf("%s's claim after its replica died mid-reset: %+v, %v; want it kept, marked", ref, l, err)
	}
	setFinalizers(nil) // the node answers again: the old Pod goes
	eventually(t, time.Minute, func() string {
		if pod := s.pod(t, ref.Name); pod != nil && pod.UID == old.UID {
			return "alice's old Pod still there with no finalizer"
		}
		return ""
	})

	// Another replica's reclaim loop, once the mark is stale, makes the
	// member fresh.
	second := staleMarkReplica(t, ctx, s.back, s.leases)
	var fresh types.UID
	eventually(t, 2*time.Minute, func() string {
		if _, err := second.ReclaimDue(ctx); err != nil {
			return "reclaim: " + err.Error()
		}
		if _, err := s.leases.Get(ctx, ref); !errors.Is(err, vdi.ErrNotFound) {
			return "the claim on " + ref.String() + " is still there"
		}
		pod := s.pod(t, ref.Name)
		if pod == nil || pod.UID == old.UID {
			return ref.Name + " has no fresh Pod"
		}
		fresh = pod.UID
		return ""
	})
	d, err = second.Claim(ctx, bob, ns, "held")
	if err != nil || d.Ref() != ref {
		t.Fatalf("bob's claim after the reset: %+v, %v; want %s", d, err, ref)
	}
	if pod := s.pod(t, ref.Name); pod == nil || pod.UID != fresh {
		t.Errorf("bob's Pod: %v; want the fresh one (%s)", pod, fresh)
	}

	// An admin's recreate through a client that gives up (a gateway's
	// cut, a closed tab) while the Pod is held: it goes on as a job, and
	// makes the member fresh once the Pod goes.
	if err := second.Release(ctx, bob, ref, ""); err != nil {
		t.Fatal(err)
	}
	waitClaimGone(t, s.leases, ref)
	old = s.pod(t, ref.Name)
	setFinalizers([]string{hold})
	rctx, giveUp := context.WithCancel(ctx)
	type answer struct {
		job *vdi.Job
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		job, _, err := second.RecreateJob(rctx, s.root, ref)
		answered <- answer{job, err}
	}()
	eventually(t, time.Minute, func() string {
		if pod := s.pod(t, ref.Name); pod == nil || pod.DeletionTimestamp == nil {
			return "the recreate has not asked for the Pod's deletion"
		}
		return ""
	})
	giveUp()
	a := <-answered
	if a.err != nil || a.job == nil || a.job.State != vdi.JobRunning || a.job.Kind != vdi.JobRecreate {
		t.Fatalf("the admin's recreate whose client gave up: %+v, %v; want its job, running", a.job, a.err)
	}
	setFinalizers(nil)
	eventually(t, 2*time.Minute, func() string {
		j, err := second.Job(ctx, s.root, ns, "held")
		if err != nil || j.State == vdi.JobRunning {
			return fmt.Sprintf("the recreate job: %+v, %v", j, err)
		}
		if j.State != vdi.JobDone {
			t.Fatalf("the recreate job: %+v; want done", j)
		}
		if pod := s.pod(t, ref.Name); pod == nil || pod.UID == old.UID {
			return ref.Name + " has no fresh Pod after the recreate"
		}
		return ""
	})
}
