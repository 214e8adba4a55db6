package kube

import (
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Config is what the kube backend's parts are built from: NewCluster,
// NewVMs, NewCTs, NewExecPath and NewSubresourcePath (NewLeases has a
// config of its own).
type Config struct {
	// REST is the cluster access, and the identity every request has.
	REST *rest.Config
	// Namespace is the one namespace pools are read in; empty reads all.
	Namespace string
	// Leases is the claim store: members are claimed there before a
	// shrink or a pool's deletion removes them. Nil for VMs only read.
	Leases vdi.Leases
}
