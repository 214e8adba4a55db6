// Package soak is the proving ground: `make soak` runs the whole system
// (three kube-backend portal replicas on a real kube-apiserver with the
// kubelet stand-in, plus a local-backend portal) under load while things
// fail, fuzzes every network parser for a bounded time, and prints a table
// of checks ending with "N passed, M failed". Each check is a figure with
// its threshold or a fault with what must hold after it.
//
// The soak is a Go test gated by SOAK_SCALE (short or default), so
// `go test ./...` skips it; every loop is bounded in count and time.
package soak
