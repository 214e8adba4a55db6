//go:build tools

// Package testcluster records the programs this module exists to build: the
// real kube-apiserver and etcd that the portal's tests run against, and the
// kube-controller-manager whose garbage collector the KubeVirt tests need.
package testcluster

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
