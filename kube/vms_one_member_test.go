package kube_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testOneMemberMadeFresh: a pool of one stays listed while its only
// member is made fresh, with its state and for whom it is, after its
// holder's release and by an admin's recreate: the pools list shows it
// resetting (nothing free) to alice and the admin, never to bob; the
// dashboard's desktops show the member; a kiosk link finds it. Once the
// member is back it is free again. And when the replica resetting it dies
// after deleting its VM and before asking for its clone, another
// replica's reclaim loop still finds the pool and makes it again.
func testOneMemberMadeFresh(t *testing.T, s *vmSetup, standIn *testcluster.KubeVirtStandIn, svc *vdi.Service, leases vdi.Leases) {
	ctx, admin := s.ctx, s.admin
	ns := s.c.Namespace(t)
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	root, alice, bob := vdi.Identity{Login: "root", Admin: true}, vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	if err := svc.CreatePool(ctx, root, vdi.Pool{Namespace: ns, Name: "one", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 1,
		Access: vdi.Access{Users: []string{"alice"}}}); err != nil {
		t.Fatalf("create pool one: %v", err)
	}
	ref := vdi.Ref{Namespace: ns, Name: "one-1"}
	gone := func() {
		t.Helper()
		for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			var vm kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &vm); client.IgnoreNotFound(err) == nil && err != nil {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s still there a minute after its reset began; want it deleted while its clone is held", ref)
			}
		}
	}
	// listed checks pool one in id's pools list: with size, free and
	// resetting as want says ("" for not listed).
	listed := func(when string, id vdi.Identity, want string) {
		t.Helper()
		ps, err := svc.Pools(ctx, id)
		if err != nil {
			t.Fatalf("%s: %s's pools: %v", when, id.Login, err)
		}
		got := ""
		if i := slices.IndexFunc(ps, func(p vdi.PoolStatus) bool { return p.Namespace == ns && p.Name == "one" }); i >= 0 {
			p := ps[i]
			got = fmt.Sprintf("size %d, free %d, resetting %d", p.Size, p.Free, p.Resetting)
			if p.Closed != "" || !slices.Equal(p.Access.Users, []string{"alice"}) {
				t.Errorf("%s: pool one for %s reads access %v, closed %q; want alice's", when, id.Login, p.Access, p.Closed)
			}
		}
		if got != want {
			t.Errorf("%s: pool one in %s's list: %q; want %q", when, id.Login, got, want)
		}
	}
	resetting := "size 1, free 0, resetting 1"

	// The holder's release: its claim is reset while the clone is held.
	if _, err := svc.Claim(ctx, alice, ns, "one"); err != nil {
		t.Fatal(err)
	}
	standIn.HoldClones(ns)
	t.Cleanup(func() { standIn.ReleaseClones(ns) })
	if err := svc.Release(ctx, alice, ref, ""); err != nil {
		t.Fatal(err)
	}
	gone()
	listed("its only member re-cloned after a release", alice, resetting)
	listed("its only member re-cloned after a release", root, resetting)
	listed("its only member re-cloned after a release", bob, "")
	if nss, err := svc.PoolNamespaces(ctx, "one"); err != nil || !slices.Contains(nss, ns) {
		t.Errorf("the kiosk's lookup of pool one while its member is re-cloned: %v, %v; want %s", nss, err, ns)
	}
	ds, err := svc.Desktops(ctx, root, true)
	if err != nil || !slices.ContainsFunc(ds, func(d vdi.Desktop) bool { return d.Ref() == ref && d.Resetting != "" }) {
		t.Errorf("the dashboard's desktops while %s is re-cloned: %v; want it listed as being reset", ref, err)
	}
	standIn.ReleaseClones(ns)
	waitClaimGone(t, leases, ref)
	listed("its member back", alice, "size 1, free 1, resetting 0")

	// An admin's recreate, a job: the pool is listed with its job.
	standIn.HoldClones(ns)
	job, _, err := svc.RecreateJob(ctx, root, ref)
	if err != nil || job == nil {
		t.Fatalf("the admin's recreate of %s: %+v, %v; want a job", ref, job, err)
	}
	gone()
	listed("its only member recreated by an admin", root, "size 0, free 0, resetting 0")
	if ps, err := svc.Pools(ctx, root); err == nil {
		if i := slices.IndexFunc(ps, func(p vdi.PoolStatus) bool { return p.Namespace == ns && p.Name == "one" }); i < 0 || ps[i].Job == nil || ps[i].Job.Kind != vdi.JobRecreate {
			t.Errorf("pool one during the admin's recreate: %+v; want its recreate job shown", ps)
		}
	}
	standIn.ReleaseClones(ns)
	for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if j, err := svc.Job(ctx, root, ns, "one"); err == nil && j.State != vdi.JobRunning {
			if j.State != vdi.JobDone {
				t.Fatalf("the recreate job: %+v; want done", j)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("the recreate job still runs a minute after its clone was let go")
		}
	}
	listed("its member back after the recreate", alice, "size 1, free 1, resetting 0")

	// The replica resetting the only member dies between deleting its VM
	// and asking for its clone (here its clone is refused, then it
	// stops): the pool has no VM and no clone, only the claim's mark and
	// plan. Another replica's reclaim loop still finds the pool, takes
	// the stale mark over and makes the member again.
	refused := make(chan struct{}, 1)
	cfg := rest.CopyConfig(s.sa)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/virtualmachineclones") {
				select {
				case refused <- struct{}{}:
				default:
				}
				return nil, errors.New("the replica died")
			}
			return rt.RoundTrip(req)
		})
	}
	dyingVMs, err := kube.NewVMs(kube.Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	dying := newService(dyingVMs, leases)
	if _, err := dying.Claim(ctx, alice, ns, "one"); err != nil {
		t.Fatal(err)
	}
	var vm kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &vm); err != nil {
		t.Fatal(err)
	}
	if err := dying.Release(ctx, alice, ref, ""); err != nil {
		t.Fatal(err)
	}
	<-refused
	dying.StopJobs()
	gone()
	if l, err := leases.Get(ctx, ref); err != nil || l.Annotations[vdi.AnnotationReclaiming] == "" {
		t.Fatalf("%s's claim after its replica died mid-reset: %+v, %v; want it kept, marked", ref, l, err)
	}
	second := staleMarkReplica(t, ctx, s.vms, leases)
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := second.ReclaimDue(ctx); err != nil {
			t.Logf("reclaim: %v", err)
		}
		var now kubevirtv1.VirtualMachine
		_, lerr := leases.Get(ctx, ref)
		if admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &now) == nil && now.UID != vm.UID && now.Labels[vdi.LabelPool] == "one" &&
			errors.Is(lerr, vdi.ErrNotFound) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s 2 min after its replica died mid-reset: made again %t, claim %v; want it made again and its claim let go", ref, now.UID != "" && now.UID != vm.UID, lerr)
		}
	}
	listed("its member made again by another replica", alice, "size 1, free 1, resetting 0")
}
