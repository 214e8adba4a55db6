// Package deploy holds the portal's Kubernetes manifests (a kustomize base:
// kubectl apply -k deploy/) and embeds the RBAC manifest, so the portal
// checks at start that it has exactly what deploy/rbac.yaml grants.
package deploy

import _ "embed"

// RBAC is deploy/rbac.yaml: the Namespace, ServiceAccount, ClusterRole and
// binding the portal runs under.
//
//go:embed rbac.yaml
var RBAC []byte
