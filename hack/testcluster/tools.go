//go:build tools

// Package testcluster records the two programs this module exists to build:
// the real kube-apiserver and etcd that the portal's tests run against.
package testcluster

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
