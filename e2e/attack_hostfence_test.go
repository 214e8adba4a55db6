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
// link-local address of its interface with the default route, while an
// address beyond the host (a network namespace behind a route) answers
// both. A root portal fences them all (its nftables table is in place
// while it runs, gone after a clean exit that stops its desktops); a
// portal that is not root cannot, and its log must say so (there the
// rows show the attack succeeding).
func TestAttack_DesktopReachesHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody, and a network namespace")
	}
	mustTunForAll(t)
	at := testnet.NewHostAttack(t, "10.231.80")
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_DESKTOP_UIDS=81000-81099"}
	rows := func(t *testing.T, p *Portal, fenced bool) {
		var d desktop
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Power != "running" {
			t.Fatalf("alice's claim: %d %+v", code, d)
		}
		term := openTerminal(t, p, "alice", d.Name)
		tcp := func(target string, port int) bool {
			out := term.run(fmt.Sprintf("echo \"GOT $(curl -s -m 5 http://%s:%d/ || echo refused)\"", target, port), 30*time.Second)
			return regexp.MustCompile(`GOT reached\r`).MatchString(out)
		}
		if !tcp(at.Outside, at.Beyond.Port) {
			t.Errorf("attack-table row outbound-network: an outbound desktop did not reach %s beyond the host", at.Outside)
		}
		udpRun := func(script string) { term.run(script, 30*time.Second) }
		for row, target := range at.Targets {
			for proto, reached := range map[string]bool{"tcp": tcp(target, at.Host.Port), "udp": at.UDP(t, target, udpRun)} {
				switch {
				case !reached:
					t.Logf("attack host-%s-%s: refused", row, proto)
				case !fenced && strings.Contains(p.Log(), "no host fence: the portal is not root"):
					t.Logf("attack host-%s-%s: reached here (%s), as the portal's log says", row, proto, target)
				default:
					t.Errorf("attack host-%s-%s SUCCEEDED: a desktop reached the host's listener on [::] through %s", row, proto, target)
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
