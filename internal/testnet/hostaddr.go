package testnet

import (
	"os/exec"
	"testing"
)

// AddHostAddr makes addr (IPv4) one of this host's until the test ends,
// by a route of type local on loopback, as New does for its host end: the
// kernel delivers to it and lets a process of the host bind it and connect
// from it, as for an interface's address, so package connid and the
// portal's start check count it as the host's. No address record is added
// in the host's network namespace, which every Chromium there would take
// for a network change (ERR_NETWORK_CHANGED on its requests under way).
// It skips the test only where the host cannot add the route (not root,
// or a kernel that refuses: see absent) and fails it otherwise.
func AddHostAddr(t testing.TB, addr string) {
	t.Helper()
	route := []string{"local", addr + "/32", "dev", "lo", "table", "local"}
	mustRoot(t)
	del := func() *exec.Cmd { return exec.Command("ip", append([]string{"route", "del"}, route...)...) }
	del().Run() // left by a killed run
	ip(t, append([]string{"route", "add"}, route...)...)
	t.Cleanup(func() { del().Run() })
}
