package e2e

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// TestAttack_DesktopBounds runs, from inside desktops' own terminals, what
// a user could do to the host rather than to the portal: fill the disk,
// run a memory bomb and a fork bomb, and reach the host's loopback (the
// portal) or a network the pool's policy keeps it from. It runs with the
// portal as root and as nobody; where a host gives a portal no bound
// (nobody: no cgroup tree, no mounts), the portal's log must say which.
func TestAttack_DesktopBounds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody, and a veth pair")
	}
	outside := testnet.OutsideURL(t)
	testnet.TunForAll(t)
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=3", "CORRAL_VDI_ADMINS=admin",
		"CORRAL_VDI_DESKTOP_LIMITS=nproc=400,nofile=1024,as=8G,memory=300M,pids=200,disk=64M"}
	t.Run("root", func(t *testing.T) { desktopBounds(t, MustStartPortal(t, env...), outside, true) })
	t.Run("nobody", func(t *testing.T) { desktopBounds(t, MustStartPortalAsNobody(t, env...), outside, false) })
}

func desktopBounds(t *testing.T, p *Portal, outside string, bounded bool) {
	claim := func(user, pool string) (desktop, *terminal) {
		var d desktop
		if code := p.API(t, user, "POST", "/api/vdi/pools/local/"+pool+"/claim", &d); code != 200 || d.Power != "running" {
			t.Fatalf("%s's claim: %d %+v", user, code, d)
		}
		return d, openTerminal(t, p, user, d.Name)
	}
	a, alice := claim("alice", "demo")
	u, _ := url.Parse(p.URL)
	portal := "http://127.0.0.1:" + u.Port() + "/healthz"
	reach := func(term *terminal, target string) string {
		out := term.run("echo \"GOT $(curl -s -m 5 -o /dev/null -w %{http_code} "+target+" || echo refused)\"", 20*time.Second)
		if m := regexp.MustCompile(`GOT ([0-9]+|refused)\r`).FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return out
	}
	// Outbound by default: the network, never the host's loopback. A
	// portal that is not root cannot fence its desktops' network off the
	// host's addresses, so it gives them none.
	network := func(term *terminal, when string) {
		switch got := reach(term, outside); {
		case bounded && got != "200":
			t.Errorf("attack-table row outbound-network%s: an outbound desktop got %q from %s; want 200", when, got, outside)
		case !bounded && got == "200":
			t.Errorf("attack-table row outbound-network-not-root%s: a desktop of a portal that is not root reached %s", when, outside)
		}
	}
	network(alice, "")
	if got := reach(alice, portal); got == "200" {
		t.Errorf("attack portal-loopback SUCCEEDED from an outbound desktop (%s)", portal)
	}

	// A disk fill stops at the bound; the portal still writes its database.
	out := alice.run("for f in ~/fill /tmp/fill; do dd if=/dev/zero of=$f bs=1M count=200 2>&1 | grep -o 'No space left' | sed s/^/FULL-/; done", 60*time.Second)
	switch {
	case !bounded && strings.Contains(p.Log(), "no disk bound"):
		t.Logf("attack disk-fill: unbounded here, as the portal's log says")
	case strings.Count(out, "FULL-No space left") != 2:
		t.Errorf("attack disk-fill SUCCEEDED: %q; want refused at the 64 MiB bound", out)
	default:
		t.Logf("attack disk-fill: refused at the bound")
	}
	alice.run("rm -f ~/fill /tmp/fill", 10*time.Second)
	create := `{"name":"nonet","size":1,"policy":{"network":"none"}}`
	if code := p.APIBody(t, "admin", "POST", "/api/vdi/pools", create, nil); code != 200 && code != 201 {
		t.Fatalf("after the disk fill, creating a pool (a database write): %d", code)
	}
	// A pool whose policy says none: nothing but its own loopback.
	_, dave := claim("dave", "nonet")
	if got := reach(dave, outside); got == "200" {
		t.Errorf("attack network-none SUCCEEDED: a desktop of a network=none pool reached %s", outside)
	}
	if got := reach(dave, portal); got == "200" {
		t.Errorf("attack portal-loopback SUCCEEDED from a network=none desktop")
	}

	// A memory bomb, then a fork bomb: each desktop dies with the reason,
	// and the portal and the other desktops answer.
	b, bob := claim("bob", "demo")
	c, carol := claim("carol", "demo")
	if !bounded && strings.Contains(p.Log(), "no memory or pids limit") {
		t.Logf("attack memory-bomb, fork-bomb: not bounded across a desktop here, as the portal's log says")
		return
	}
	bomb := func(name string, term *terminal, script string, victim desktop, want string) {
		term.ws.WriteMessage(1, []byte(script+"\r"))
		var d desktop
		if !eventually(60*time.Second, func() bool {
			p.API(t, "admin", "GET", "/api/vdi/desktops/local/"+victim.Name, &d) // an admin reads the reason; its holder, plain words
			return d.Power == "failed"
		}) {
			t.Errorf("attack %s: the desktop still %q after a minute; want failed", name, d.Power)
			return
		}
		if !strings.Contains(d.Reason, want) {
			t.Errorf("attack %s: failed with %q; want the reason %q", name, d.Reason, want)
		}
		if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.Name, &d); code != 200 || d.Power != "running" {
			t.Errorf("after the %s, alice's desktop: %d %+v; want running", name, code, d)
		}
		t.Logf("attack %s: desktop failed: %s", name, d.Reason)
	}
	b.Holder, c.Holder = "bob", "carol"
	bomb("memory-bomb", bob, `python3 -c 'b=[]
while True: b.append(bytearray(1<<24))'`, b, "memory limit (300 MiB) reached")
	bomb("fork-bomb", carol, `f(){ f|f& }; f`, c, "process limit (200) reached")
	// A fresh terminal: the first was not read during the bombs, and a
	// client that answers no ping for 40 s is dropped.
	network(openTerminal(t, p, "alice", a.Name), " after the bombs")
	if res, err := http.Get(p.URL + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Errorf("after the bombs the portal's /healthz: %v %v", res, err)
	}
}
