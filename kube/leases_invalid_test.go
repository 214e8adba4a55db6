package kube_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestLeasesEditedByHand writes Leases as a careless kubectl user might and
// checks that they are reported, not trusted, and crash nothing.
func TestLeasesEditedByHand(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	var logs testlog.Buffer
	leases := kube.NewLeases(kube.LeasesConfig{Client: c.Client,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := leases.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	micro := func(t time.Time) *metav1.MicroTime { m := metav1.NewMicroTime(t); return &m }
	str := func(s string) *string { return &s }
	i32 := func(i int32) *int32 { return &i }
	raw := func(member string, labels map[string]string, spec coordinationv1.LeaseSpec) {
		t.Helper()
		if labels == nil {
			labels = map[string]string{vdi.LabelPool: "hand", vdi.LabelMember: member}
		}
		o := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: vdi.LeasePrefix + member, Labels: labels}, Spec: spec}
		if _, err := c.Client.CoordinationV1().Leases(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	raw("hand-1", nil, coordinationv1.LeaseSpec{HolderIdentity: str(""), LeaseDurationSeconds: i32(3600), RenewTime: micro(now)})
	// The apiserver refuses a duration of zero or less; leaving it out is the
	// nonsense it lets through.
	raw("hand-2", nil, coordinationv1.LeaseSpec{HolderIdentity: str("mallory"), RenewTime: micro(now)})
	raw("hand-3", map[string]string{vdi.LabelPool: "hand", vdi.LabelMember: "hand-9", "team": "x"},
		coordinationv1.LeaseSpec{HolderIdentity: str("trent"), LeaseDurationSeconds: i32(3600), RenewTime: micro(now)})
	raw("hand-4", nil, coordinationv1.LeaseSpec{HolderIdentity: str("oscar")})

	for _, c := range []struct {
		member, problem, holder string
		free                    bool
	}{
		{"hand-1", "no holderIdentity", "", true},
		{"hand-2", "leaseDurationSeconds", "mallory", false},
		{"hand-3", "does not match", "trent", false},
		{"hand-4", "no renewTime", "oscar", false},
	} {
		l, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: c.member})
		if err != nil {
			t.Fatalf("Get %s: %v", c.member, err)
		}
		if !strings.Contains(l.Annotations[kube.AnnotationInvalid], c.problem) {
			t.Errorf("%s: %s=%q; want it to report %q", c.member, kube.AnnotationInvalid, l.Annotations[kube.AnnotationInvalid], c.problem)
		}
		if l.Holder != c.holder || l.Expired(now) != c.free {
			t.Errorf("%s: holder %q, expired %v; want %q, %v", c.member, l.Holder, l.Expired(now), c.holder, c.free)
		}
		if !strings.Contains(logs.String(), vdi.LeasePrefix+c.member) {
			t.Errorf("%s was not reported in the log:\n%s", c.member, logs.String())
		}
	}
	if d := mustGet(t, leases, ns, "hand-2"); d.Duration != vdi.DefaultLeaseDuration {
		t.Errorf("a missing duration became %v; want the default %v", d.Duration, vdi.DefaultLeaseDuration)
	}

	// Claims go on: the holderless member is taken over with the observed
	// resourceVersion, the others stay with their holders, nothing crashes.
	pool := leasetest.NewPool(ns, "hand", 4, 4)
	svc := newService(pool, leases)
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, ns, "hand")
	if err != nil || d.Name != "hand-1" {
		t.Fatalf("alice's claim: %+v, %v; want the holderless hand-1", d, err)
	}
	got, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "hand-1"})
	if err != nil || got.Holder != "alice" || got.Annotations[kube.AnnotationInvalid] != "" {
		t.Errorf("hand-1 after the takeover: %+v, %v; want a sound Lease held by alice", got, err)
	}
	if _, err := svc.Claim(ctx, vdi.Identity{Login: "bob"}, ns, "hand"); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("bob's claim: %v; want EConflict (hand-2..4 are held)", err)
	}
}

func mustGet(t *testing.T, leases *kube.Leases, ns, member string) *vdi.Lease {
	t.Helper()
	l, err := leases.Get(context.Background(), vdi.Ref{Namespace: ns, Name: member})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
