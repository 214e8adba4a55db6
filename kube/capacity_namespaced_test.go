package kube_test

import (
	"context"
	"path/filepath"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testCapacityNamespaced admits a GPU pool as the default namespaced
// install's portal, bound to deploy/'s rules alone: it may list nodes
// but read VMIs only in the pool's namespace. The device a VMI there holds
// is counted (and the refusal says what was not), and once it is freed
// the pool is made. resource is permitted by the test's KubeVirt CR.
func testCapacityNamespaced(t *testing.T, e *capacityEnv, resource string) {
	user := e.ns + "-namespaced"
	e.bindNamespacedInstall(t, user)
	vms, err := kube.NewVMs(kube.Config{REST: e.c.User(t, user), Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	node := e.node(t, "nsd", map[string]int64{resource: 1})
	e.vmi(t, "nsd-holder", node, kubevirtv1.Running, resource)
	e.golden(t, "gold-nsd", nil, resource)
	create := func() error {
		return vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: "nsd", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "gold-nsd", Size: 1})
	}
	e.refused(t, "nsd-1", vdi.EConflict, create,
		"the nodes have room for 0", "Node "+node+": "+resource+" allocatable 1, held 1, free 0",
		"Only VMs in namespace "+e.ns+" are counted")
	holder := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nsd-holder"}}
	if err := e.admin.Delete(e.ctx, holder); err != nil {
		t.Fatal(err)
	}
	if err := create(); err != nil {
		t.Fatalf("a pool of 1 on a free device, as the namespaced install: %v", err)
	}
	if n := e.members(t, "nsd"); n != 1 {
		t.Fatalf("pool nsd has %d members; want 1", n)
	}
}

// bindNamespacedInstall grants user what deploy/ (the namespaced mode)
// grants the portal's ServiceAccount: its ClusterRole's cluster-wide reads
// and the pool namespace kit's Role in e.ns.
func (e *capacityEnv) bindNamespacedInstall(t *testing.T, user string) {
	t.Helper()
	deploy := filepath.Join("..", "deploy")
	base, err := deploytest.Render(deploy)
	if err != nil {
		t.Fatal(err)
	}
	kit, err := deploytest.RenderPoolNamespace(deploy, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var objs []client.Object
	for _, u := range append(base, kit...) {
		switch {
		case u.GetKind() == "ClusterRole" && u.GetName() == "corral-vdi-portal-cluster":
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			objs = append(objs,
				&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: role.Rules},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subjects,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}})
		case u.GetKind() == "Role" && u.GetNamespace() == e.ns:
			var role rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			objs = append(objs,
				&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: user + "-" + role.Name}, Rules: role.Rules},
				&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: user + "-" + role.Name}, Subjects: subjects,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user + "-" + role.Name}})
		}
	}
	if len(objs) != 4 {
		t.Fatalf("deploy/ renders %d of the namespaced install's roles and bindings; want its ClusterRole corral-vdi-portal-cluster and the pool kit's Role", len(objs)/2)
	}
	for _, o := range objs {
		if err := e.admin.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.admin.Delete(context.Background(), o) })
	}
	// Each role's first rule counts once its role and binding do.
	var await []authorizationv1.ResourceAttributes
	for _, o := range objs {
		var r rbacv1.PolicyRule
		switch role := o.(type) {
		case *rbacv1.ClusterRole:
			r = role.Rules[0]
		case *rbacv1.Role:
			r = role.Rules[0]
		default:
			continue
		}
		await = append(await, authorizationv1.ResourceAttributes{Namespace: e.ns, Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]})
	}
	e.c.AwaitAccess(t, user, nil, await...)
}
