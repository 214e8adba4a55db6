package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestLeases_OnChange: a replica hears every change of a claim another
// replica makes (created, written, deleted) from its Lease cache, with
// the member's address, so that an invitee's console on it checks its
// invitation at once (vdi.Service.ClaimChanged).
func TestLeases_OnChange(t *testing.T) {
	c := testcluster.MustStart(t)
	ns := c.Namespace(t)
	a, b := mustLeases(t, c.Config), mustLeases(t, c.Config)
	ref := vdi.Ref{Namespace: ns, Name: "m-1"}
	heard := make(chan vdi.Ref, 16)
	b.(*kube.Leases).OnChange(func(r vdi.Ref) {
		if r == ref {
			heard <- r
		}
	})
	hear := func(what string) {
		t.Helper()
		select {
		case <-heard:
		case <-time.After(30 * time.Second):
			t.Fatalf("b heard nothing of a's %s of %s's claim", what, ref)
		}
	}
	ctx := context.Background()
	now := time.Now()
	l, err := a.Create(ctx, &vdi.Lease{Namespace: ns, Member: ref.Name, Pool: "p", Holder: "alice",
		AcquireTime: now, RenewTime: now, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hear("claim")
	l.Annotations = map[string]string{"example.com/note": "written"}
	if l, err = a.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	hear("write")
	if err := a.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	hear("release")
}
