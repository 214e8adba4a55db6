// Package deploy holds the portal's Kubernetes manifests (a kustomize base:
// kubectl apply -k deploy/) and embeds the RBAC manifests, so the portal
// checks at start that it has exactly what they grant.
package deploy

import _ "embed"

// RBAC is deploy/rbac.yaml: the cluster-wide mode's Namespace,
// ServiceAccount, ClusterRole and binding.
//
//go:embed rbac.yaml
var RBAC []byte

// PoolRBAC is deploy/pool-namespace/rbac.yaml: the Role the namespaced
// mode grants the portal in each pool namespace.
//
//go:embed pool-namespace/rbac.yaml
var PoolRBAC []byte

// ClusterRBAC is deploy/base/rbac-cluster.yaml: what the namespaced mode grants
// cluster-wide (reads of cluster-scoped things) and in the portal's own
// namespace (the reclaim leader's Lease).
//
//go:embed base/rbac-cluster.yaml
var ClusterRBAC []byte
