package portal

import (
	"context"
	"errors"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// checkKubeVirtClones runs what a pool create checks before it clones
// (kube/vms_preflight.go): KubeVirt's Snapshot feature gate where the
// release needs it set, and every disk of each pool's golden VM Bound on a
// StorageClass with a VolumeSnapshotClass.
func checkKubeVirtClones(ctx context.Context, fs *findings, rc *rest.Config, dyn dynamic.Interface) {
	vms, err := kube.NewVMs(kube.Config{REST: rc})
	if err != nil {
		fs.warn("snapshot-gate", "Fix the kubeconfig.", "%v", err)
		return
	}
	if version, err := vms.SnapshotGate(ctx); err != nil {
		failWith(fs, "snapshot-gate", err)
	} else if version != "" {
		fs.ok("snapshot-gate", "KubeVirt %s can snapshot and clone golden VMs", version)
	}
	for _, g := range poolGoldens(ctx, dyn) {
		golden, err := vms.GoldenVM(ctx, g[0], g[1])
		var classes []kube.SnapshotClass
		if err == nil {
			classes, err = vms.GoldenDisks(ctx, golden)
		}
		if err != nil {
			failWith(fs, "golden-disks", err)
			continue
		}
		fs.ok("golden-disks", "golden VM %s/%s: every disk Bound and on a class KubeVirt snapshots with", g[0], g[1])
		for _, c := range classes {
			if c.Retain {
				fs.warn("snapshot-retain", "Use a VolumeSnapshotClass with deletionPolicy: Delete for golden disks, or delete retained VolumeSnapshotContents and storage snapshots yourself.",
					"golden VM %s/%s is snapshotted with VolumeSnapshotClass %s (deletionPolicy Retain): each golden state's snapshot the portal deletes stays in the storage", g[0], g[1], c.Name)
				break
			}
		}
	}
}

// failWith reports err as a failed check: a vdi.Error's message and hint.
func failWith(fs *findings, check string, err error) {
	var e *vdi.Error
	if errors.As(err, &e) {
		fs.fail(check, e.Hint, "%s", e.Msg)
		return
	}
	fs.fail(check, "Check the portal's access (deploy/rbac.yaml) and the cluster, then run doctor again.", "%v", err)
}

// poolGoldens returns the {namespace, name} of the golden VMs that pool
// members name as their source.
func poolGoldens(ctx context.Context, dyn dynamic.Interface) [][2]string {
	members, err := dyn.Resource(vmGVR).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool})
	if err != nil {
		return nil
	}
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, m := range members.Items {
		g := [2]string{m.GetNamespace(), m.GetAnnotations()[kube.AnnotationSource]}
		if g[1] != "" && !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+"/"+out[i][1] < out[j][0]+"/"+out[j][1] })
	return out
}
