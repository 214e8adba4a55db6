// Package kube is the Kubernetes side of the portal: claims kept in
// coordination.k8s.io/v1 Leases (the truth about who holds a member), and
// later the KubeVirt backend. It knows client-go, not HTTP.
package kube
