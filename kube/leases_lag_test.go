package kube_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimOfAUserOnALaggingReplica: alice claims on one replica, then
// again on another whose Lease watch has not shown her first claim yet
// (held back). The second claim takes her claim lock after the first let
// it go, and must answer with the desktop she holds, never give her a
// second one: its reads after the lock show her Leases as of every write
// before it (vdi.ReadAfter: read past the cache by their holder label),
// where its cache showed her desktop free and it took another (two tabs
// on two replicas, the watch a few milliseconds late).
func TestClaimOfAUserOnALaggingReplica(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	gate := newWatchGate("/leases")
	defer gate.release()
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	lagging, other := mustLeases(t, cfg), mustLeases(t, c.Config)
	pool := leasetest.NewPool(ns, "lag", 6, 6)
	svc := func(l vdi.Leases) *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: pool, Leases: l, Audit: nopAudit{}, Log: slog.New(slog.DiscardHandler), LockNamespace: ns})
	}
	a, b := svc(other), svc(lagging)
	alice := vdi.Identity{Login: "alice"}
	gate.hold()
	first, err := a.Claim(ctx, alice, ns, "lag")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Claim(ctx, alice, ns, "lag")
	gate.release()
	if err != nil {
		t.Fatal(err)
	}
	held, _ := mustLeases(t, c.Config).List(ctx, ns, "lag")
	var hers []string
	for _, l := range held {
		if l.Holder == "alice" {
			hers = append(hers, l.Member)
		}
	}
	if second.Name != first.Name || len(hers) != 1 {
		t.Errorf("alice's claims got %s then %s, and she holds %v; want one desktop", first.Name, second.Name, hers)
	}
}

// TestLeasesOfAnEarlierRelease: Leases an earlier release wrote without
// the holder label (or, updated to a new holder, with the old holder's
// label kept) are given their holder's label by the replicas: those there
// at start, which two replicas label at once, and one written while a
// replica's watch lags, which the other labels, so that alice's claim on
// the lagging replica reads it past its cache by her label and answers
// with the desktop she holds, where it gave her a second one.
func TestLeasesOfAnEarlierRelease(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	leases := c.Client.CoordinationV1().Leases(ns)
	earlier := func(member, holder string) { // as a portal before the holder label wrote it
		t.Helper()
		secs, now := int32(3600), metav1.NewMicroTime(time.Now())
		o := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: vdi.LeasePrefix + member,
			Labels: map[string]string{vdi.LabelPool: "old", vdi.LabelMember: member}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
		if _, err := leases.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labelled := func(member, holder string) {
		t.Helper()
		want := vdi.HolderLabel(holder)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			o, err := leases.Get(ctx, vdi.LeasePrefix+member, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if o.Labels[vdi.LabelHolder] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: labels %v after 30 s; want %s=%s, %s's", member, o.Labels, vdi.LabelHolder, want, holder)
			}
		}
	}
	earlier("old-1", "bob")

	gate := newWatchGate("/leases")
	defer gate.release()
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	lagging, other := mustLeases(t, cfg), mustLeases(t, c.Config)
	labelled("old-1", "bob") // there at start: both replicas label it at once

	gate.hold()
	earlier("old-2", "alice") // an earlier release's claim of alice's, unseen by the lagging replica
	// An earlier release's update gives old-1 to carol, keeping bob's label.
	if _, err := leases.Patch(ctx, vdi.LeasePrefix+"old-1", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"carol"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled("old-2", "alice")
	labelled("old-1", "carol")

	pool := leasetest.NewPool(ns, "old", 4, 4)
	svc := vdi.NewService(vdi.Config{Backend: pool, Leases: lagging, Audit: nopAudit{}, Log: slog.New(slog.DiscardHandler), LockNamespace: ns})
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, ns, "old")
	gate.release()
	if err != nil {
		t.Fatal(err)
	}
	held, _ := other.List(ctx, ns, "old")
	var hers []string
	for _, l := range held {
		if l.Holder == "alice" {
			hers = append(hers, l.Member)
		}
	}
	if d.Name != "old-2" || len(hers) != 1 {
		t.Errorf("alice's claim on the lagging replica got %s, and she holds %v; want old-2, the desktop an earlier release gave her", d.Name, hers)
	}
}
