package kube_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// vmSetup is what the VM tests share: a fresh namespace on the package's
// cluster with deploy/rbac.yaml applied, a cluster-admin client for what
// kubectl users would do, and the portal's ServiceAccount with VMs acting
// as it. KubeVirt (its CRDs alone, or the stand-in that runs VMs) is each
// test's to start.
type vmSetup struct {
	c     *testcluster.Cluster
	ctx   context.Context
	ns    string
	admin client.WithWatch
	sa    *rest.Config
	vms   *kube.VMs
}

func newVMSetup(t *testing.T) *vmSetup {
	t.Helper()
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	sa := c.PortalServiceAccount(t)
	vms, err := kube.NewVMs(kube.Config{REST: sa})
	if err != nil {
		t.Fatal(err)
	}
	return &vmSetup{c: c, ctx: context.Background(), ns: c.Namespace(t), admin: c.AdminClient(t), sa: sa, vms: vms}
}

// service returns vdi.Service over the setup's VMs with Leases as the
// portal's ServiceAccount.
func (s *vmSetup) service(t *testing.T) (*vdi.Service, vdi.Leases) {
	t.Helper()
	leases := mustLeases(t, s.sa)
	svc := newService(s.vms, leases)
	t.Cleanup(svc.StopJobs) // a reset a release left going (a VM's stop) ends with the test
	return svc, leases
}

// waitClaimGone waits until ref's claim is gone: a release on a cluster
// answers while the VM stops or is made again, or the CT's Pod goes (vdi:
// a long reset goes on detached).
func waitClaimGone(t *testing.T, leases vdi.Leases, ref vdi.Ref) {
	t.Helper()
	for end := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := leases.Get(context.Background(), ref)
		if errors.Is(err, vdi.ErrNotFound) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the claim on %s 3 min after its release: %v; want it gone once its reset ended", ref, err)
		}
	}
}

// newService returns vdi.Service over backend and leases, auditing nothing
// and logging nowhere.
func newService(backend vdi.Backend, leases vdi.Leases) *vdi.Service {
	return vdi.NewService(vdi.Config{Backend: backend, Leases: leases, Audit: nopAudit{}, Log: slog.New(slog.DiscardHandler)})
}

// nopAudit records nothing.
type nopAudit struct{}

func (nopAudit) Record(context.Context, vdi.AuditEvent) error { return nil }

// memberNames returns the names of pool namespace/pool's members, in the
// backend's order.
func memberNames(t *testing.T, b vdi.Backend, namespace, pool string) []string {
	t.Helper()
	ms, err := b.Members(context.Background(), namespace, pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

// mustRecordedFor fails unless VM pool namespace/pool reads, once the
// backend's cache shows all its members, as users' alone with a recorded
// policy, and no member is closed: what a stuck or late clone must leave
// (a member without its definition would read as open to everyone).
func mustRecordedFor(t *testing.T, b *kube.VMs, namespace, pool string, members int, users ...string) {
	t.Helper()
	var p vdi.Pool
	var ms []vdi.Member
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ms, err = b.Members(context.Background(), namespace, pool); err != nil || len(ms) != members {
			continue
		}
		p, err = b.Pool(context.Background(), namespace, pool)
		if err == nil && p.Closed == "" && slices.Equal(p.Access.Users, users) && p.Policy.Record &&
			!slices.ContainsFunc(ms, func(m vdi.Member) bool { return m.Closed != "" }) {
			return
		}
	}
	t.Errorf("pool %s/%s: access %v, policy %+v, closed %q, members %+v, %v; want %d members, %v's, recorded, none closed",
		namespace, pool, p.Access, p.Policy, p.Closed, ms, err, members, users)
}
