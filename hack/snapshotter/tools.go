//go:build tools

// Package tools pins the CSI snapshot-controller and the module that carries
// its CRDs; see scripts/kubevirt.sh, which builds and caches them.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
