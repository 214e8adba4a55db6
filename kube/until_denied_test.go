package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// grantWithoutWatch binds user in ns to a hand-made Role that may do all a
// CT pool needs except watch.
func grantWithoutWatch(t *testing.T, c *testcluster.Cluster, ns, user string) {
	t.Helper()
	verbs := []string{"get", "list", "create", "update", "patch", "delete"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-watch"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: verbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs},
	}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-watch"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	ctx := context.Background()
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.AwaitAccess(t, user, nil, authorizationv1.ResourceAttributes{Namespace: ns, Resource: "pods", Verb: "create"})
}

// TestWaitWithoutWatchFailsAtOnce starts a CT member as a portal whose
// hand-made Role lacks watch: the Pod is made, and the wait for it to run
// ends at once (not at PowerTimeout) with an error naming the verb, the
// resource and the namespace to grant; with the caches started (their
// watch refused too) the same.
func TestWaitWithoutWatchFailsAtOnce(t *testing.T) {
	c := testcluster.Shared(t)
	for _, cached := range []bool{false, true} {
		name := "Uncached"
		if cached {
			name = "Cached"
		}
		t.Run(name, func(t *testing.T) {
			ns := c.Namespace(t)
			ctPoolConfigMap(t, c, ns, "shell")
			user := "nowatch-" + ns
			grantWithoutWatch(t, c, ns, user)
			back, err := kube.NewCluster(kube.Config{REST: c.User(t, user), Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), kube.PowerTimeout)
			defer cancel()
			if cached {
				back.FillWait = 2 * time.Second
				_ = back.StartCaches(ctx) // it may fill from its list; its watch is refused
			}
			start := time.Now()
			err = back.Start(ctx, vdi.Ref{Namespace: ns, Name: "shell-1"})
			took := time.Since(start)
			var ve *vdi.Error
			if !errors.As(err, &ve) || ve.Code != vdi.EUnavailable {
				t.Fatalf("Start without watch: %v; want a refusal saying so", err)
			}
			for _, want := range []string{`"watch"`, `"pods"`, ns} {
				if !strings.Contains(ve.Hint, want) {
					t.Errorf("Start without watch: hint %q; want it to name %s", ve.Hint, want)
				}
			}
			if !strings.Contains(ve.Msg, "may not watch pods in namespace "+ns) {
				t.Errorf("Start without watch: %q; want it to say the portal may not watch pods in %s", ve.Msg, ns)
			}
			// The reflector's first retry comes after 800 ms; a wait that
			// retried would run to PowerTimeout (5 min).
			if took > 20*time.Second {
				t.Errorf("Start without watch took %v; want it to fail at once, not near its %v deadline", took, kube.PowerTimeout)
			}
		})
	}
}
