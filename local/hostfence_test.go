package local

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
	"github.com/google/nftables"
)

// TestHostFence installs the fence twice (one table, not two), checks it
// by its nftables dump, and removes it (twice: a table already gone is no
// error).
func TestHostFence(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nftables needs root")
	}
	f := NewHostFence(202500, 202599, t.TempDir())
	t.Cleanup(func() { f.Remove() })
	if err := f.Check(); err == nil {
		t.Fatal("Check before Install = nil; want the table missing")
	}
	for range 2 {
		if err := f.Install(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Check(); err != nil {
		t.Errorf("Check after Install: %v", err)
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tb := range tables {
		if tb.Name == f.Table() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d tables named %s after two installs; want 1", n, f.Table())
	}
	for range 2 {
		if err := f.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Check(); err == nil {
		t.Error("Check after Remove = nil; want the table missing")
	}
}

// TestAttack_DesktopReachesHost runs, from an outbound desktop's terminal,
// HTTP to an abstract Unix socket of the host's (refused by the desktop's
// own network namespace, while the host's own curl reaches it), then TCP
// and UDP to a listener of the host's on [::], through the host's
// second address (a veth end) and through the link-local address of its
// interface with the default route. Without the fence every row is
// reached (the attack, shown each run); with it every row is refused,
// while an address beyond the host (a network namespace behind a route)
// still answers both.
func TestAttack_DesktopReachesHost(t *testing.T) {
	testnet.TunForAll(t) // else the host fence is not checked: desktops get no network
	s := MustSandbox(t, "202400-202499", Limits{NProc: 300})
	if m := s.NetworkMissing(); m != "" {
		t.Skip(m)
	}
	at := testnet.NewHostAttack(t)
	spec := MustSandboxedSpec(t, s, "fence")
	spec.Network = NetworkOutbound
	d := MustStartDesktop(t, spec)
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	i := 0
	run := func(cmd string) string {
		i++
		end := fmt.Sprintf("DONE-%d", i)
		term.Write([]byte(cmd + "; echo DONE-$((" + fmt.Sprint(i) + "+0))\r"))
		return readUntil(t, term, end)
	}
	tcp := func(target string, port int) bool {
		out := run(fmt.Sprintf("echo \"GOT $(curl -s -m 5 http://%s:%d/ || echo refused)\"", target, port))
		return strings.Contains(out, "GOT reached")
	}
	// The host's abstract Unix sockets belong to its network namespace:
	// reached from the host (the listener works), never from a desktop.
	abstract := testnet.ListenAbstract(t)
	if out, err := exec.Command("curl", "-s", "-m", "5", "--abstract-unix-socket", abstract, "http://host/").Output(); string(out) != "reached" {
		t.Fatalf("curl on the host to the abstract socket @%s: %q %v; want reached", abstract, out, err)
	}
	if out := run("echo \"GOT $(curl -s -m 5 --abstract-unix-socket " + abstract + " http://host/ || echo refused)\""); strings.Contains(out, "GOT reached") {
		t.Errorf("attack host-abstract-socket SUCCEEDED: a desktop reached the host's abstract Unix socket @%s", abstract)
	}
	for _, fenced := range []bool{false, true} {
		if fenced {
			if err := s.FenceHost(t.TempDir()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.UnfenceHost() })
		}
		for row, target := range at.Targets {
			got := tcp(target, at.Host.Port)
			// Unfenced, the attack must be shown to work: a desktop that
			// has just started may not have its IPv6 address yet (DAD).
			for try := 0; !fenced && !got && try < 5; try++ {
				time.Sleep(time.Second)
				got = tcp(target, at.Host.Port)
			}
			if got == fenced {
				t.Errorf("fenced=%v: tcp to the host's %s %s reached=%v; want %v", fenced, row, target, got, !fenced)
			}
			if got := at.UDP(t, target, func(script string) { run(script) }); got == fenced {
				t.Errorf("fenced=%v: udp to the host's %s %s reached=%v; want %v", fenced, row, target, got, !fenced)
			}
		}
		if !tcp(at.Outside, at.Beyond.Port) {
			t.Errorf("fenced=%v: tcp to %s beyond the host was not reached", fenced, at.Outside)
		}
	}
}
