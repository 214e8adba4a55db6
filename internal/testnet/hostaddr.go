package testnet

import (
	"os/exec"
	"strings"
	"testing"
)

// AddHostAddr makes addr (IPv4) one of this host's until the test ends,
// by a route of type local on loopback, as New does for its host end: the
// kernel delivers to it and lets a process of the host bind it and connect
// from it, as for an interface's address, so package connid and the
// portal's start check count it as the host's. No address record is added
// in the host's network namespace, which every Chromium there would take
// for a network change (ERR_NETWORK_CHANGED on its requests under way).
// It skips the test when the host cannot add the route (not root).
func AddHostAddr(t testing.TB, addr string) {
	t.Helper()
	route := []string{"local", addr + "/32", "dev", "lo", "table", "local"}
	ip := func(verb string) *exec.Cmd { return exec.Command("ip", append([]string{"route", verb}, route...)...) }
	ip("del").Run() // left by a killed run
	if out, err := ip("add").CombinedOutput(); err != nil {
		t.Skipf("ip route add %s: %v: %s", strings.Join(route, " "), err, out)
	}
	t.Cleanup(func() { ip("del").Run() })
}
