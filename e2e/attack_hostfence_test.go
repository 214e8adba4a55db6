package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// TestAttack_DesktopReachesHost runs, from inside an outbound desktop's
// terminal, TCP and UDP to a listener of the host's on [::] through the
// host's second address (a veth end of the test's) and through the
// link-local address of its interface with the default route. A root
// portal fences them all while an address beyond the host (a network
// namespace behind a route) answers both (its nftables table is in place
// while it runs, gone after a clean exit that stops its desktops). A
// portal that is not root cannot fence its desktops' network stacks, so
// it gives them none: every row is refused, the address beyond the host
// too, and its log says why.
func TestAttack_DesktopReachesHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody, and a network namespace")
	}
	testnet.TunForAll(t)
	at := testnet.NewHostAttack(t)
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_DESKTOP_UIDS=81000-81099"}
	rows := func(t *testing.T, p *Portal, root bool) {
		var d desktop
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Power != "running" {
			t.Fatalf("alice's claim: %d %+v", code, d)
		}
		term := openTerminal(t, p, "alice", d.Name)
		tcp := func(target string, port int) bool {
			out := term.run(fmt.Sprintf("echo \"GOT $(curl -s -m 5 http://%s:%d/ || echo refused)\"", target, port), 30*time.Second)
			return regexp.MustCompile(`GOT reached\r`).MatchString(out)
		}
		switch reached := tcp(at.Outside, at.Beyond.Port); {
		case root && !reached:
			t.Errorf("attack-table row outbound-network: an outbound desktop did not reach %s beyond the host", at.Outside)
		case !root && reached:
			t.Errorf("attack-table row outbound-network-not-root: a desktop of a portal that is not root reached %s (it has no host fence, so it must have no network)", at.Outside)
		case !root && !strings.Contains(p.Log(), "outbound network for local desktops is off: the portal is not root"):
			t.Errorf("a portal that is not root gave its desktops no network, and its log does not say why")
		}
		udpRun := func(script string) { term.run(script, 30*time.Second) }
		for row, target := range at.Targets {
			for proto, reached := range map[string]bool{"tcp": tcp(target, at.Host.Port), "udp": udpReached(t, at, root, target, udpRun)} {
				if reached {
					t.Errorf("attack host-%s-%s SUCCEEDED: a desktop reached the host's listener on [::] through %s", row, proto, target)
				} else {
					t.Logf("attack host-%s-%s: refused", row, proto)
				}
			}
		}
	}
	t.Run("root", func(t *testing.T) {
		p := MustStartPortal(t, env...)
		fence := local.NewHostFence(81000, 81099, filepath.Join(p.DataDir, "local"))
		if err := fence.Check(); err != nil {
			t.Errorf("the root portal runs without its host fence: %v", err)
		}
		rows(t, p, true)
		p.Stop(t)
		if err := fence.Check(); err == nil {
			t.Errorf("after a clean exit that stopped its desktops the fence %s is still there", fence.Table())
		}
	})
	t.Run("nobody", func(t *testing.T) { rows(t, MustStartPortalAsNobody(t, env...), false) })
}

// udpReached reports whether a datagram from the desktop reached the
// host's listener through target. A desktop with a network sends one
// beyond the host after it, in order (testnet's UDP); one without a
// network reaches nothing, so the host's count after the send says it.
func udpReached(t *testing.T, at *testnet.HostAttack, network bool, target string, run func(string)) bool {
	if network {
		return at.UDP(t, target, run)
	}
	before := at.Host.Datagrams()
	run(fmt.Sprintf("echo probe > /dev/udp/%s/%d", strings.Trim(target, "[]"), at.Host.Port))
	return at.Host.Datagrams() > before
}

// dropHostFence removes the host fence of root portal p (desktop uids
// first to last), so that a test may attack what lies behind it.
func dropHostFence(t *testing.T, p *Portal, first, last int) {
	t.Helper()
	f := local.NewHostFence(first, last, filepath.Join(p.DataDir, "local"))
	if err := f.Check(); err != nil {
		t.Fatalf("the root portal runs without its host fence: %v", err)
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
}
