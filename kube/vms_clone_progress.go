package kube

import (
	"context"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
)

// labelRestoreSource is the label KubeVirt's restore puts on every PVC it
// makes (pkg/storage/snapshot/restore.go, restoreSourceNameLabel).
const labelRestoreSource = "restore.kubevirt.io/source-vm-name"

// cloneProgress returns what can be seen to move of clone c's work, as
// KubeVirt v1.7's clone controller (pkg/virt-controller/watch/clone)
// steps through it: its phase (SnapshotInProgress, RestoreInProgress,
// CreatingTargetVM, Succeeded), the restore it made, and the phases of
// the disks that restore made (on slow storage the restore waits for
// them to bind, changing nothing else).
func (v *VMs) cloneProgress(ctx context.Context, c *clonev1beta1.VirtualMachineClone) string {
	s := phaseText(c.Status.Phase)
	if c.Status.RestoreName == nil {
		return s
	}
	restore := *c.Status.RestoreName
	s += ", restore " + restore
	pvcs, err := v.addrs.core.PersistentVolumeClaims(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelRestoreSource})
	if err != nil {
		return s
	}
	var disks []string
	for _, p := range pvcs.Items {
		if p.Annotations[annRestoreName] == restore {
			disks = append(disks, p.Name+" "+string(p.Status.Phase))
		}
	}
	if len(disks) == 0 {
		return s
	}
	slices.Sort(disks)
	return s + ", disks " + strings.Join(disks, ", ")
}

// cloneMoves tells a clone that stands still from one that moves: it
// keeps the last progress seen and since when it is unchanged (a clone
// that cannot be read does not move).
type cloneMoves struct {
	last  string
	since time.Time
}

// saw records progress p seen at now.
func (m *cloneMoves) saw(p string, now time.Time) {
	if p != m.last {
		m.last, m.since = p, now
	}
}

// still returns how long the progress has not changed.
func (m *cloneMoves) still(now time.Time) time.Duration { return now.Sub(m.since) }
