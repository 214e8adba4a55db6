//go:build tools

// Package tools pins KubeVirt's own virt-controller and virt-api, which the
// tests run against; see scripts/kubevirt.sh, which builds and caches them.
package tools

import (
	_ "kubevirt.io/kubevirt/cmd/virt-api"
	_ "kubevirt.io/kubevirt/cmd/virt-controller"
)
