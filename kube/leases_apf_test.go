package kube_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimsRefusedByAPF: the API server's Priority and Fairness refuses
// the portal's requests (429), as it does when the portal's priority
// level is too small for a storm: here a level of a few seats that
// rejects rather than queues, and 60 claimants on 40 members through
// three portal instances, each claim bounded to 10 s (its ClaimWait; the
// caller sets no deadline). Some requests
// are refused; no member is answered to two users; every claim is
// answered with a desktop, "none free", or the refusal in words (the API
// server refuses, 429, try again), not a deadline run out; and no Lease
// is left without its claim (its holder's next claim is answered with
// it). Claim locks whose delete was refused too run out by themselves.
func TestClaimsRefusedByAPF(t *testing.T) {
	t.Run("ClaimLocks", func(t *testing.T) { claimsRefusedByAPF(t, false) })
	// With claims by shard the shards' renewals and takeovers are
	// refused too: a claim that finds no holder in time is told so.
	t.Run("ByShard", func(t *testing.T) { claimsRefusedByAPF(t, true) })
}

func claimsRefusedByAPF(t *testing.T, byShard bool) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	sa := stormAccount(t, c, ns)
	var refused atomic.Int64
	sa.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				refused.Add(1)
			}
			return resp, err
		})
	})
	kube.ReportUnreachable(sa) // as the portal's config: outside the count
	open := func() vdi.Leases {
		cs := testcluster.Clientset(t, sa)
		l := kube.NewLeases(kube.LeasesConfig{Client: cs, Namespace: ns})
		lctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		if err := l.Start(lctx); err != nil {
			t.Fatal(err)
		}
		return l
	}
	portals := []vdi.Leases{open(), open(), open()}
	admin := mustLeases(t, c.Config)
	const members, claimants = 40, 60
	pool := leasetest.NewPool(ns, "tight", members, members)
	// The claim's own bound (vdi.Config.ClaimWait), here 10 s where a
	// portal's is 30: a refusal whose Retry-After runs past it is
	// answered at once.
	service := func(i int) *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: pool, Leases: portals[i%len(portals)], Audit: nopAudit{},
			Log: slog.New(slog.DiscardHandler), ClaimWait: 10 * time.Second})
	}
	if byShard {
		v := newView("r0", "r1", "r2")
		f := newShardFleet(t, ns, pool, 0)
		f.claimWait = 10 * time.Second
		replicas := []*vdi.Service{f.start("r0", portals[0], v), f.start("r1", portals[1], v), f.start("r2", portals[2], v)}
		waitShardsTaken(t, c, ns)
		service = func(i int) *vdi.Service { return replicas[i%len(replicas)] }
	}

	apfRoute(t, c, sa, ns, apfLevel(t, c, ns, "tight", 1))
	got := make([]string, claimants)
	errs := make([]error, claimants)
	var wg sync.WaitGroup
	for i := range claimants {
		wg.Go(func() {
			d, err := service(i).Claim(ctx, vdi.Identity{Login: fmt.Sprintf("user-%d", i)}, ns, "tight")
			got[i], errs[i] = d.Name, err
		})
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Fatal("no request was refused: the level is not tight enough to test anything")
	}
	holder := map[string]string{} // member -> the user answered with it
	answered, unavailable := 0, 0
	for i, err := range errs {
		switch code := vdi.ErrorCode(err); {
		case err == nil:
			if u := holder[got[i]]; u != "" {
				t.Errorf("%s answered to user-%d and %s", got[i], i, u)
			}
			holder[got[i]] = fmt.Sprintf("user-%d", i)
			answered++
		case code == vdi.EUnavailable:
			var e *vdi.Error
			if errors.As(err, &e); !strings.Contains(e.Msg, "API server") || !strings.Contains(e.Msg, "429") || !strings.Contains(e.Hint, "Try again") {
				t.Errorf("user-%d is told %q (%q); want that the API server refuses (429) and to try again", i, e.Msg, e.Hint)
			}
			unavailable++
		case code != vdi.EConflict:
			t.Errorf("user-%d: %v; want a desktop, none free or the refusal", i, err)
		}
	}
	leases, err := admin.List(ctx, ns, "tight")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if u := holder[l.Member]; u != "" {
			if u != l.Holder {
				t.Errorf("%s is held by %s but was answered to %s", l.Member, l.Holder, u)
			}
			continue
		}
		// Won, then the answer was lost to a refusal: her next claim
		// is answered with it.
		d, err := newService(pool, admin).Claim(ctx, vdi.Identity{Login: l.Holder}, ns, "tight")
		if err != nil || d.Name != l.Member {
			t.Errorf("%s holds %s no claim was answered with; asking again gives %s, %v; want it", l.Holder, l.Member, d.Name, err)
		}
	}
	all, err := admin.List(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	locks := 0
	for _, l := range all {
		if l.Pool != "tight" {
			// A lock whose delete was refused too, or a shard: it runs
			// out by itself.
			if locks++; l.Duration > 15*time.Second {
				t.Errorf("claim lock %s left for %v; want one that runs out within 15 s", l.Member, l.Duration)
			}
		}
	}
	left := "claim locks left to run out"
	if byShard {
		left = "claim shards"
	}
	t.Logf("%d claimants on %d members: %d requests refused (429); %d answered a desktop, %d told the API server refuses; %d Leases, %d %s",
		claimants, members, refused.Load(), answered, unavailable, len(leases), locks, left)
}

// stormAccount returns the config of a ServiceAccount of ns that may
// read and write Leases there, as the portal's may.
func stormAccount(t *testing.T, c *testcluster.Cluster, ns string) *rest.Config {
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "storm", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "storm"}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.AwaitAccess(t, "system:serviceaccount:"+ns+":storm", []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		authorizationv1.ResourceAttributes{Namespace: ns, Group: "coordination.k8s.io", Resource: "leases", Verb: "update"})
	return c.ServiceAccount(t, ns, "storm")
}

// apfLevel makes a priority level of ns named name with shares seats'
// worth of nominal concurrency, none lent or borrowed, that rejects what
// it cannot seat at once; it is deleted when t ends.
func apfLevel(t *testing.T, c *testcluster.Cluster, ns, name string, shares int32) string {
	ctx := context.Background()
	name = ns + "-" + name
	zero := int32(0)
	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &shares,
				LendablePercent: &zero, BorrowingLimitPercent: &zero,
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	pls := c.Client.FlowcontrolV1().PriorityLevelConfigurations()
	created, err := pls.Create(ctx, pl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pls.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return string(created.UID) + " " + name
}

// apfRoute routes the writes and reads of single Leases (not lists and
// watches: the caches fill as before) of sa's ServiceAccount in ns to
// level (from apfLevel), and waits until the API server classifies them
// so.
func apfRoute(t *testing.T, c *testcluster.Cluster, sa *rest.Config, ns, level string) {
	ctx := context.Background()
	fss := c.Client.FlowcontrolV1().FlowSchemas()
	name := ns + "-storm"
	var uid, plName string
	fmt.Sscan(level, &uid, &plName)
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: plName},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: "storm"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "create", "update", "patch", "delete"},
					APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Namespaces: []string{ns}}},
			}},
		}}
	if _, err := fss.Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fss.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	hc, err := rest.HTTPClientFor(sa)
	if err != nil {
		t.Fatal(err)
	}
	probe := sa.Host + "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/probe"
	var got string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Get(probe)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got = resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"); got == uid {
			return
		}
	}
	t.Fatalf("the API server classifies sa's Lease reads to priority level %s; want %s's, %s", got, plName, uid)
}
