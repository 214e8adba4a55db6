package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// runDoctorAs runs doctor on the kube backend with kubeconfig and the
// lease namespace ns, and returns its findings and error.
func runDoctorAs(t *testing.T, kubeconfig, ns string, extra ...string) (findings, error) {
	t.Helper()
	var out, usage bytes.Buffer
	env := map[string]string{"KUBECONFIG": kubeconfig, "CORRAL_VDI_BACKEND": "kube", "CORRAL_VDI_NAMESPACE": ns, "HOME": t.TempDir()}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	e := cli.Env{Getenv: func(k string) string { return env[k] }, Out: &out, ErrOut: &usage}
	err := Doctor(context.Background(), e, []string{"-json"})
	var fs findings
	if jerr := json.Unmarshal(out.Bytes(), &fs); jerr != nil {
		t.Fatalf("doctor -json printed %q (%v); err %v", out.String(), jerr, err)
	}
	return fs, err
}

// mustLevel fails t unless check has a finding at level whose text has want.
func mustLevel(t *testing.T, fs findings, check, level, want string) finding {
	t.Helper()
	for _, f := range fs.find(check) {
		if f.Level == level && strings.Contains(f.What, want) {
			return f
		}
	}
	t.Fatalf("no %s finding of %s saying %q in %+v", level, check, want, fs.find(check))
	return finding{}
}

// TestDoctor_Kube runs doctor against the real test apiserver with the
// KubeVirt stand-in: all ok as the portal's ServiceAccount; a missing RBAC
// verb, a missing VolumeSnapshotClass and a cluster without KubeVirt each
// give their finding and its fix.
func TestDoctor_Kube(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	c.StartKubeVirtStandIn(t)
	c.InstallVolumeSnapshotAPI(t)
	c.Apply(t, "../deploy/rbac.yaml")
	dyn := dynamic.NewForConfigOrDie(c.Config)
	cs := testcluster.Clientset(t, c.Config)

	kv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"namespace": "kubevirt", "name": "kubevirt"}}}
	if _, err := dyn.Resource(kubeVirtGVR).Namespace("kubevirt").Create(ctx, kv, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	deployed := func(kv *unstructured.Unstructured) {
		unstructured.SetNestedField(kv.Object, "v1.9.0", "status", "observedKubeVirtVersion")
		unstructured.SetNestedField(kv.Object, "Deployed", "status", "phase")
	}
	if err := testcluster.UpdateStatus(ctx, c.AdminClient(t), kv, deployed); err != nil {
		t.Fatal(err)
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "doctor-csi",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "csi.doctor.example"}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}) })
	vsc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": "doctor-snap"}, "driver": "csi.doctor.example", "deletionPolicy": "Delete"}}
	if _, err := dyn.Resource(vscGVR).Create(ctx, vsc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	portal := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))

	t.Run("AllOKAsThePortal", func(t *testing.T) {
		fs, err := runDoctorAs(t, portal, "corral-vdi")
		if err != nil {
			t.Fatalf("doctor: %v\n%+v", err, fs)
		}
		for _, f := range fs {
			if f.Level != levelOK {
				t.Errorf("finding %+v; want ok", f)
			}
		}
		mustLevel(t, fs, "kubevirt", levelOK, "KubeVirt v1.9.0")
		mustLevel(t, fs, "usbredir", levelOK, "virt-api serves usbredir")
		mustLevel(t, fs, "rbac", levelOK, "verbs the portal uses are allowed")
		mustLevel(t, fs, "snapshot-class", levelOK, "doctor-snap")
		mustLevel(t, fs, "lease-namespace", levelOK, "corral-vdi")
	})

	t.Run("MissingRBACVerb", func(t *testing.T) {
		ns := c.Namespace(t)
		role := portalRole(t)
		// Take "delete" from the Leases rule: releasing a claim needs it.
		for i, r := range role.Rules {
			if len(r.Resources) > 0 && r.Resources[0] == "leases" {
				role.Rules[i].Verbs = []string{"get", "list", "watch", "create", "update", "patch"}
			}
		}
		role.ObjectMeta = metav1.ObjectMeta{Name: "doctor-" + ns}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "doctor-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "lesser"}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
			cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
		})
		c.AwaitAccess(t, "system:serviceaccount:"+ns+":lesser", []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			authorizationv1.ResourceAttributes{Namespace: ns, Group: "coordination.k8s.io", Resource: "leases", Verb: "update"})
		fs, err := runDoctorAs(t, testcluster.WriteKubeconfig(t, c.ServiceAccount(t, ns, "lesser")), "corral-vdi")
		if cli.ExitCode(err) != cli.ExitFailed {
			t.Fatalf("doctor with a verb missing: %v; want exit %d", err, cli.ExitFailed)
		}
		f := mustLevel(t, fs, "rbac", levelFail, "delete leases.coordination.k8s.io")
		if strings.Count(f.What, ",") != 0 || !strings.Contains(f.Fix, "deploy/rbac.yaml") {
			t.Fatalf("rbac finding %+v; want only the Lease delete and the fix", f)
		}
	})

	t.Run("MissingVolumeSnapshotClass", func(t *testing.T) {
		if err := dyn.Resource(vscGVR).Delete(ctx, "doctor-snap", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		fs, err := runDoctorAs(t, portal, "corral-vdi")
		if err == nil {
			t.Fatal("doctor without a VolumeSnapshotClass: no error")
		}
		f := mustLevel(t, fs, "snapshot-class", levelFail, "StorageClass doctor-csi (the default StorageClass) has no VolumeSnapshotClass")
		if !strings.Contains(f.Fix, "driver: csi.doctor.example") {
			t.Fatalf("fix %q; want the driver to create a class for", f.Fix)
		}
	})

	t.Run("NoKubeVirt", func(t *testing.T) {
		bare := testcluster.MustStart(t)
		fs, err := runDoctorAs(t, testcluster.WriteKubeconfig(t, bare.Config), "default")
		if err == nil {
			t.Fatal("doctor without KubeVirt: no error")
		}
		f := mustLevel(t, fs, "kubevirt", levelFail, "KubeVirt is not installed")
		if !strings.Contains(f.Fix, "kubevirt-operator.yaml") {
			t.Fatalf("fix %q; want how to install KubeVirt", f.Fix)
		}
		mustLevel(t, fs, "apiserver", levelOK, "Kubernetes v1.37.2")
	})
}

// TestDoctor_KubeNamespaced: in the namespaced mode doctor asks per pool
// namespace, on a cluster of its own with only the base's RBAC and the
// pool Role in pools-a: all allowed for pools-a; pools-b, without the
// Role, is named with its fix.
func TestDoctor_KubeNamespaced(t *testing.T) {
	c := testcluster.MustStart(t)
	for _, ns := range []string{"pools-a", "pools-b"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := deploytest.Render("../deploy")
	if err != nil {
		t.Fatal(err)
	}
	var rbac []*unstructured.Unstructured
	for _, u := range objs {
		if k := u.GetKind(); (k == "Namespace" || k == "ServiceAccount" || strings.Contains(k, "Role")) && u.GetNamespace() != "corral-vdi-desktops" {
			rbac = append(rbac, u)
		}
	}
	kit, err := deploytest.RenderPoolNamespace("../deploy", "pools-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploytest.Apply(c.Config, append(rbac, kit...), false); err != nil {
		t.Fatal(err)
	}
	portal := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	fs, _ := runDoctorAs(t, portal, "corral-vdi", "CORRAL_VDI_POOL_NAMESPACES=pools-a")
	mustLevel(t, fs, "rbac", levelOK, "per pool namespace: pools-a")
	mustLevel(t, fs, "lease-namespace", levelOK, "corral-vdi")
	fs, _ = runDoctorAs(t, portal, "corral-vdi", "CORRAL_VDI_POOL_NAMESPACES=pools-a,pools-b")
	f := mustLevel(t, fs, "rbac", levelFail, "(in namespace pools-b)")
	if strings.Contains(f.What, "pools-a") || strings.Contains(f.What, "cluster-wide") || !strings.Contains(f.Fix, "apply deploy/pool-namespace in pools-b") {
		t.Fatalf("rbac finding %+v; want only pools-b named, with its fix", f)
	}
}

// portalRole reads the ClusterRole of deploy/rbac.yaml.
func portalRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile("../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err == nil && r.Kind == "ClusterRole" {
			return &r
		}
	}
	t.Fatal("deploy/rbac.yaml has no ClusterRole")
	return nil
}
