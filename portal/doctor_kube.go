package portal

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// kubeVirtInstall is where doctor sends an admin without KubeVirt.
const kubeVirtInstall = "Install KubeVirt (https://kubevirt.io/user-guide/cluster_admin/installation/): " +
	"kubectl apply -f kubevirt-operator.yaml -f kubevirt-cr.yaml from its release, then run doctor again."

var (
	kubeVirtGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	vmGVR       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	vscGVR      = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

// checkKube checks a cluster as the identity of cfg's kubeconfig: the
// portal's ServiceAccount in a pod, or whoever the kubeconfig names.
func checkKube(ctx context.Context, fs *findings, cfg Config) {
	rc, err := restConfig(cfg.Kube.Kubeconfig, cfg.Kube.QPS)
	if err != nil {
		fs.fail("apiserver", "Point KUBECONFIG (-kubeconfig) at a working kubeconfig.", "%v", err)
		return
	}
	rc.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fs.fail("apiserver", "Fix the kubeconfig.", "%v", err)
		return
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		fs.fail("apiserver", "Fix the kubeconfig.", "%v", err)
		return
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		fs.fail("apiserver", "Check that the cluster is up and the kubeconfig's server and credentials are right.", "the API server does not answer: %v", err)
		return
	}
	fs.ok("apiserver", "Kubernetes %s at %s", v.GitVersion, rc.Host)
	if checkKubeVirt(ctx, fs, cs, dyn) {
		checkSnapshots(ctx, fs, cs, dyn, cfg.Kube.PoolNamespaces)
		checkKubeVirtClones(ctx, fs, rc, dyn)
	}
	doctorRBAC(ctx, fs, cs, cfg)
	checkHostDevices(ctx, fs, cs)
	checkLeaseNamespace(ctx, fs, cs, cfg.Kube.Namespace)
}

// servesResource reports whether the API server serves resource in any
// version of group, and which version.
func servesResource(cs kubernetes.Interface, group, resource string) (string, bool) {
	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		return "", false
	}
	for _, g := range groups.Groups {
		if g.Name != group {
			continue
		}
		for _, gv := range g.Versions {
			rl, err := cs.Discovery().ServerResourcesForGroupVersion(gv.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range rl.APIResources {
				if r.Name == resource {
					return gv.Version, true
				}
			}
		}
	}
	return "", false
}

// checkKubeVirt reports KubeVirt, its version, virt-api's subresources and
// the clone and snapshot APIs; it returns false without KubeVirt.
func checkKubeVirt(ctx context.Context, fs *findings, cs kubernetes.Interface, dyn dynamic.Interface) bool {
	if _, ok := servesResource(cs, "kubevirt.io", "virtualmachines"); !ok {
		fs.fail("kubevirt", kubeVirtInstall, "KubeVirt is not installed: the cluster serves no kubevirt.io VirtualMachines, so there can be no vm pools")
		return false
	}
	list, err := dyn.Resource(kubeVirtGVR).List(ctx, metav1.ListOptions{})
	switch {
	case err != nil:
		fs.warn("kubevirt", "Let the portal list kubevirts.kubevirt.io (deploy/rbac.yaml).", "KubeVirt's API is there, but its version could not be read: %v", err)
	case len(list.Items) == 0:
		fs.warn("kubevirt", kubeVirtInstall, "the KubeVirt CRDs are there but no KubeVirt CR: the operator has deployed nothing")
	default:
		kv := list.Items[0]
		version, _, _ := unstructured.NestedString(kv.Object, "status", "observedKubeVirtVersion")
		phase, _, _ := unstructured.NestedString(kv.Object, "status", "phase")
		if version == "" {
			version = "unknown version"
		}
		if phase != "" && phase != "Deployed" {
			fs.warn("kubevirt", "Wait for the KubeVirt CR to reach Deployed (kubectl get kubevirt -A).", "KubeVirt %s in %s is %s", version, kv.GetNamespace(), phase)
		} else {
			fs.ok("kubevirt", "KubeVirt %s (%s/%s)", version, kv.GetNamespace(), kv.GetName())
		}
	}
	if _, ok := servesResource(cs, "subresources.kubevirt.io", "virtualmachineinstances/vnc"); ok {
		fs.ok("virt-api", "subresources.kubevirt.io is served: power and consoles through the API server")
		if _, ok := servesResource(cs, "subresources.kubevirt.io", "virtualmachineinstances/usbredir"); ok {
			fs.ok("usbredir", "virt-api serves usbredir: holders can attach USB devices to VMs with clientPassthrough")
		} else {
			fs.warn("usbredir", "Upgrade KubeVirt (usbredir came in v0.44) to let holders attach USB devices.", "virt-api serves no usbredir subresource")
		}
	} else {
		fs.fail("virt-api", "Check virt-api's pods and the v1.subresources.kubevirt.io APIService (kubectl get apiservice).",
			"subresources.kubevirt.io is not served: desktops cannot be started, stopped or reached through the API server")
	}
	if v, ok := servesResource(cs, "clone.kubevirt.io", "virtualmachineclones"); ok {
		fs.ok("clone-api", "clone.kubevirt.io/%s VirtualMachineClones", v)
	} else {
		fs.fail("clone-api", "Upgrade KubeVirt to a release with the clone API (v1.0 or later) and enable its Snapshot feature gate.", "the clone API (clone.kubevirt.io) is missing: members cannot be cloned from golden VMs")
	}
	if v, ok := servesResource(cs, "snapshot.kubevirt.io", "virtualmachinesnapshots"); ok {
		fs.ok("snapshot-api", "snapshot.kubevirt.io/%s VirtualMachineSnapshots", v)
	} else {
		fs.fail("snapshot-api", "Enable KubeVirt's Snapshot feature gate.", "snapshot.kubevirt.io is missing: golden VMs cannot be snapshotted to clone from")
	}
	return true
}

// checkSnapshots checks that every StorageClass the golden VMs' disks use
// (the default one before there are pools) has a VolumeSnapshotClass of
// the same driver: without one, cloning a golden VM never finishes.
func checkSnapshots(ctx context.Context, fs *findings, cs kubernetes.Interface, dyn dynamic.Interface, poolNamespaces []string) {
	scs, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		fs.warn("snapshot-class", "Let the portal list storageclasses (deploy/rbac.yaml).", "StorageClasses could not be read: %v", err)
		return
	}
	provisioner := map[string]string{}
	var defaults []string
	for _, sc := range scs.Items {
		provisioner[sc.Name] = sc.Provisioner
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			defaults = append(defaults, sc.Name)
		}
	}
	used, from := goldenStorageClasses(ctx, dyn, poolNamespaces)
	if len(used) == 0 {
		used, from = defaults, "the default StorageClass"
	}
	if len(used) == 0 {
		fs.warn("snapshot-class", "Mark a StorageClass default (storageclass.kubernetes.io/is-default-class), or give the golden VMs' disks one.",
			"no default StorageClass and no golden VM to read one from: cannot tell which VolumeSnapshotClass clones need")
		return
	}
	vscs, err := dyn.Resource(vscGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		fs.fail("snapshot-class", "Install the CSI external-snapshotter CRDs and controller, and a VolumeSnapshotClass for your CSI driver.",
			"the cluster has no VolumeSnapshot API (snapshot.storage.k8s.io): golden VMs cannot be cloned")
		return
	} else if err != nil {
		fs.warn("snapshot-class", "Let the portal list volumesnapshotclasses (deploy/rbac.yaml).", "VolumeSnapshotClasses could not be read: %v", err)
		return
	}
	drivers := map[string][]string{}
	for _, c := range vscs.Items {
		d, _, _ := unstructured.NestedString(c.Object, "driver")
		drivers[d] = append(drivers[d], c.GetName())
	}
	for _, sc := range used {
		p, known := provisioner[sc]
		switch {
		case !known:
			fs.fail("snapshot-class", "Create StorageClass "+sc+" or move the golden VM's disks to one that exists.", "StorageClass %s (%s) does not exist", sc, from)
		case len(drivers[p]) == 0:
			fs.fail("snapshot-class", fmt.Sprintf("Create a VolumeSnapshotClass with driver: %s (e.g. kubectl apply -f - with apiVersion snapshot.storage.k8s.io/v1, kind VolumeSnapshotClass, driver %s, deletionPolicy Delete).", p, p),
				"StorageClass %s (%s) has no VolumeSnapshotClass for its provisioner %s: cloning a golden VM on it never finishes", sc, from, p)
		default:
			fs.ok("snapshot-class", "StorageClass %s (%s): VolumeSnapshotClass %s", sc, from, strings.Join(drivers[p], ", "))
		}
	}
}

// goldenStorageClasses returns the StorageClasses of the golden VMs that
// pool members name as their source, in the pool namespaces (all when
// none are given).
func goldenStorageClasses(ctx context.Context, dyn dynamic.Interface, poolNamespaces []string) ([]string, string) {
	if len(poolNamespaces) == 0 {
		poolNamespaces = []string{""}
	}
	var members []unstructured.Unstructured
	for _, ns := range poolNamespaces {
		list, err := dyn.Resource(vmGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool})
		if err != nil {
			return nil, ""
		}
		members = append(members, list.Items...)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range members {
		src := m.GetAnnotations()[kube.AnnotationSource]
		if src == "" || seen[m.GetNamespace()+"/"+src] {
			continue
		}
		seen[m.GetNamespace()+"/"+src] = true
		g, err := dyn.Resource(vmGVR).Namespace(m.GetNamespace()).Get(ctx, src, metav1.GetOptions{})
		if err != nil {
			continue
		}
		dvts, _, _ := unstructured.NestedSlice(g.Object, "spec", "dataVolumeTemplates")
		for _, d := range dvts {
			dm, _ := d.(map[string]any)
			for _, path := range [][]string{{"spec", "storage", "storageClassName"}, {"spec", "pvc", "storageClassName"}} {
				if sc, _, _ := unstructured.NestedString(dm, path...); sc != "" && !seen["sc:"+sc] {
					seen["sc:"+sc] = true
					out = append(out, sc)
				}
			}
		}
	}
	sort.Strings(out)
	return out, "used by golden VMs"
}

// doctorRBAC asks the API server, with SelfSubjectAccessReviews, for every
// verb the portal needs where it needs it (as the portal checks at start:
// per pool namespace in the namespaced mode), and names each one missing.
func doctorRBAC(ctx context.Context, fs *findings, cs kubernetes.Interface, cfg Config) {
	perms := requiredPermissions(cfg.Kube.Namespace, cfg.Kube.PoolNamespaces)
	missing, err := missingPermissions(ctx, cs, perms)
	if err != nil {
		fs.fail("rbac", "Check the kubeconfig's credentials.", "SelfSubjectAccessReview failed: %v", err)
		return
	}
	if len(missing) > 0 {
		fix := rbacFix(cfg.Kube.Namespace, cfg.Kube.PoolNamespaces, missing)
		if len(cfg.Kube.PoolNamespaces) == 0 {
			fix = "kubectl apply -f deploy/rbac.yaml (the portal's ClusterRole), or add these verbs to the role bound to this identity."
		}
		fs.fail("rbac", fix, "the portal may not: %s", describeMissing(missing))
		return
	}
	if len(cfg.Kube.PoolNamespaces) == 0 {
		fs.ok("rbac", "all %d verbs the portal uses are allowed (SelfSubjectAccessReview, cluster-wide)", len(perms))
		return
	}
	fs.ok("rbac", "all %d verbs the portal uses are allowed (SelfSubjectAccessReview, per pool namespace: %s)", len(perms), strings.Join(cfg.Kube.PoolNamespaces, ", "))
}

// checkHostDevices sums what nodes offer beyond CPU and memory: GPUs and
// other host devices that GPU pools claim.
func checkHostDevices(ctx context.Context, fs *findings, cs kubernetes.Interface) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fs.warn("host-devices", "Let the portal list nodes (deploy/rbac.yaml).", "nodes could not be read: %v", err)
		return
	}
	total := map[string]int64{}
	for _, n := range nodes.Items {
		for name, q := range n.Status.Allocatable {
			s := string(name)
			if strings.Contains(s, "/") && !strings.HasPrefix(s, "hugepages-") && !strings.HasPrefix(s, "kubernetes.io/") {
				total[s] += q.Value()
			}
		}
	}
	if len(total) == 0 {
		fs.ok("host-devices", "%d node(s), no GPUs or host devices allocatable: pools without host devices only", len(nodes.Items))
		return
	}
	var parts []string
	for name, v := range total {
		parts = append(parts, fmt.Sprintf("%s: %d", name, v))
	}
	sort.Strings(parts)
	fs.ok("host-devices", "%d node(s) offer %s", len(nodes.Items), strings.Join(parts, ", "))
}

// checkLeaseNamespace checks the portal's own namespace, where replicas
// elect the reclaim leader with a Lease.
func checkLeaseNamespace(ctx context.Context, fs *findings, cs kubernetes.Interface, ns string) {
	_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fs.fail("lease-namespace", "kubectl create namespace "+ns+", or set CORRAL_VDI_NAMESPACE to the portal's namespace.", "namespace %s does not exist: the reclaim leader's Lease cannot be made", ns)
		return
	case err != nil && !apierrors.IsForbidden(err):
		fs.warn("lease-namespace", "Check the cluster.", "namespace %s: %v", ns, err)
		return
	}
	for _, verb := range []string{"get", "create", "update"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: "coordination.k8s.io", Resource: "leases", Verb: verb}}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil || !got.Status.Allowed {
			fs.fail("lease-namespace", "kubectl apply -f deploy/rbac.yaml, or grant leases get/create/update in "+ns+".", "the portal may not %s Leases in %s", verb, ns)
			return
		}
	}
	fs.ok("lease-namespace", "namespace %s: the reclaim leader's Lease can be kept there", ns)
}
