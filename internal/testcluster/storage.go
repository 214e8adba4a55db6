package testcluster

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallVolumeSnapshotAPI installs the CSI external-snapshotter's
// VolumeSnapshotClass CRD (snapshot.storage.k8s.io/v1, cluster-scoped), as
// a cluster with CSI snapshots has it. There is no snapshot controller:
// tests read and write the classes only.
func (c *Cluster) InstallVolumeSnapshotAPI(tb testing.TB) {
	tb.Helper()
	vsc := clusterScoped(crd("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass", "volumesnapshotclasses", "vsclass", "vsclasses"))
	// *.k8s.io groups are protected: the upstream CRD carries this.
	vsc.Annotations = map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/814"}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{vsc}}); err != nil {
		tb.Fatalf("testcluster: install the VolumeSnapshotClass CRD: %v", err)
	}
}
