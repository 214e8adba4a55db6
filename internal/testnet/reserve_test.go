package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Two test processes on one machine (two e2e shards, or e2e beside local)
// must never be given the same namespace or subnet: Reserve skips a name
// another holds, whether this process or an earlier run made it.
func TestReserve_SkipsTakenNames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	base := fmt.Sprintf("cvt%d-", os.Getpid()%1000)
	// Another process's namespace, as "ip netns add" leaves it.
	if out, err := exec.Command("ip", "netns", "add", base+"1").CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", base+"1").Run() })
	name, n := Reserve(t, base)
	if n != 2 || name != base+"2" {
		t.Errorf("Reserve beside a taken %s1 = %s, %d; want %s2, 2", base, name, n, base)
	}
	if _, m := Reserve(t, base); m != 3 {
		t.Errorf("a second Reserve = %d; want 3 (2 is this test's)", m)
	}
	a, b := New(t), New(t)
	if a.Host == b.Host || a.NS == b.NS {
		t.Errorf("two Nets share %s/%s and %s/%s", a.NS, a.Host, b.NS, b.Host)
	}
}
