package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// haAttack is a row of the attack table on the HA install: the attacker's
// request to a replica of haScreen while alice's serial console is open on
// a, the refusal expected (status, a word its body has), and, after it,
// that her console still answers and the VMI's serial console saw no
// client more nor any kicked, with after's own checks.
type haAttack struct {
	name   string
	attack func(t *testing.T, hs *haScreen, h *haArena) *http.Response
	status int
	says   string
	after  func(t *testing.T, hs *haScreen, h *haArena)
	// opened and kicked are the serial clients the row's attack opens and
	// has virt-handler kick, where it must (none: the row's checks say).
	opened, kicked int
}

// haArena is what the rows share: alice's serial console on a and the
// version of its Lease.
type haArena struct {
	alice   *websocket.Conn
	version string
}

// haAttacks are the rows on a holder's serial line across replicas: her
// second tab takes it over as on one replica, and nobody else does
// (another user, an invitee, an admin beside her, a peer question), nor
// does a guest that never reads its line keep it from her next console.
func haAttacks() []haAttack {
	held := func(hs *haScreen, version string) string {
		return relay.PeerPath + "held/serial/" + version + "/" + hs.ns + "/" + hs.member
	}
	return []haAttack{
		{
			// mallory reads /metrics of a replica as deploy/ runs it (an
			// Ingress sends every path to it) without the token: refused,
			// where it named every pool and namespace. Prometheus, with
			// the Secret's metrics-token, reads it.
			name: "MetricsWithoutTheToken",
			attack: func(t *testing.T, hs *haScreen, _ *haArena) *http.Response {
				res, err := http.Get(hs.reps["b"].p.URL + "/metrics")
				must(t, err)
				return res
			},
			status: 401, says: "bearer token",
			after: func(t *testing.T, hs *haScreen, _ *haArena) {
				req, err := http.NewRequest("GET", hs.reps["b"].p.URL+"/metrics", nil)
				must(t, err)
				req.Header.Set("Authorization", "Bearer "+hs.secrets["corral-vdi-secrets/metrics-token"])
				res, err := http.DefaultClient.Do(req)
				must(t, err)
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || !strings.Contains(string(body), "corral_vdi_pool_size") {
					t.Errorf("/metrics with the Secret's token: %d; want 200 with the pools' series", res.StatusCode)
				}
			},
		},
		{
			// mallory opens alice's serial console on b, to take the line
			// over as her second tab would: refused before any dial.
			name: "StrangerTakesTheSerialLineOnAnotherReplica",
			attack: func(t *testing.T, hs *haScreen, _ *haArena) *http.Response {
				_, res, _ := dialWS(hs.reps["b"].p, "mallory", "/ws/serial/"+hs.ns+"/"+hs.member, hs.reps["b"].p.URL)
				return res
			},
			status: 403,
		},
		{
			// erin, invited with control, opens the serial console on c:
			// she joins alice's line over a stream link, never a client
			// of her own that would take it over.
			name: "InviteeTakesTheSerialLineOnAnotherReplica",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				ws, res, err := dialWS(hs.reps["c"].p, "erin", "/ws/serial/"+hs.ns+"/"+hs.member, hs.reps["c"].p.URL)
				if err != nil {
					t.Fatalf("erin's serial console on c: %v (%v)", err, status(res))
				}
				t.Cleanup(func() { ws.Close() })
				must(t, h.alice.WriteMessage(websocket.BinaryMessage, []byte("echo er$((1+1))in\r")))
				if got := readUntil(ws, "er2in"); !strings.Contains(got, "er2in") {
					t.Errorf("erin's serial console on c read %q; want alice's line", got)
				}
				ws.Close()
				return res
			},
			status: 101,
		},
		{
			// ops, an admin, opens the serial console on c beside alice's:
			// he watches it, and his keys reach nobody.
			name: "AdminTypesIntoTheHoldersSerialLine",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				ws, res, err := dialWS(hs.reps["c"].p, "ops", "/ws/serial/"+hs.ns+"/"+hs.member, hs.reps["c"].p.URL)
				if err != nil {
					t.Fatalf("ops's serial console on c: %v (%v)", err, status(res))
				}
				defer ws.Close()
				must(t, ws.WriteMessage(websocket.BinaryMessage, []byte("echo ops-$((2*4))\r")))
				time.Sleep(300 * time.Millisecond) // let the relays pass it on (or not)
				must(t, h.alice.WriteMessage(websocket.BinaryMessage, []byte("echo al$((3+4))ice\r")))
				if got := readUntil(h.alice, "al7ice"); strings.Contains(got, "ops-8") || !strings.Contains(got, "al7ice") {
					t.Errorf("alice's serial console read %q; want her command's output and nothing of ops's (ops-8)", got)
				}
				readUntil(ws, "al7ice")
				return res
			},
			status: 101,
		},
		{
			// Whether a replica holds the line is a peer's question: an
			// unsigned one is refused, and a user's.
			name: "UnsignedHeldQuestion",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				res, err := http.Get(hs.reps["a"].p.URL + held(hs, h.version))
				must(t, err)
				return res
			},
			status: 401, says: "CORRAL_VDI_PEER_SECRET",
		},
		{
			name: "UserAsksWhetherTheLineIsHeld",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				req, err := http.NewRequest("GET", hs.reps["a"].p.URL+held(hs, h.version), nil)
				must(t, err)
				req.Header.Set("Tailscale-User-Login", "mallory")
				res, err := http.DefaultClient.Do(req)
				must(t, err)
				return res
			},
			status: 403, says: "Peer links are for peer portals",
		},
		{
			// A signed question, answered (a holds the line: a replica
			// asking would wait), then replayed: refused, a signature
			// being good once.
			name: "ReplayedHeldQuestion",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				a := hs.reps["a"].p.URL
				req, err := http.NewRequest("GET", a+held(hs, h.version), nil)
				must(t, err)
				req.Header.Set(relay.PeerAuthHeader, relay.SignPeer([]byte(hs.secrets["corral-vdi-secrets/peer-secret"]), time.Now(), strings.TrimPrefix(a, "http://"),
					relay.HeldKind("serial", h.version), hs.ns, hs.member))
				res, err := http.DefaultClient.Do(req)
				must(t, err)
				var ans relay.Held
				json.NewDecoder(res.Body).Decode(&ans)
				res.Body.Close()
				if res.StatusCode != 200 || !ans.Held {
					t.Errorf("a signed question to a about the line it holds: %d %+v; want 200, held", res.StatusCode, ans)
				}
				res, err = http.DefaultClient.Do(req)
				must(t, err)
				return res
			},
			status: 401, says: "good once",
		},
		{
			// A claim forwarded to the replica holding its user's shard,
			// signed with the peer secret (here for a pool there is not),
			// then replayed: refused, a signature being good once.
			name: "ReplayedClaimForward",
			attack: func(t *testing.T, hs *haScreen, _ *haArena) *http.Response {
				body := []byte(`{"login":"mallory","namespace":"` + hs.ns + `","pool":"no-such-pool"}`)
				req := claimForward(t, hs, body, body)
				res, err := http.DefaultClient.Do(req)
				must(t, err)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Errorf("a signed claim forward to b: %d; want 200", res.StatusCode)
				}
				req = claimForward(t, hs, body, body)
				req.Header.Set(relay.PeerAuthHeader, res.Request.Header.Get(relay.PeerAuthHeader))
				res, err = http.DefaultClient.Do(req)
				must(t, err)
				return res
			},
			status: 401, says: "good once",
		},
		{
			// mallory, holding a signed forward of a claim of hers, sends
			// it with alice's name in the body: the signature covers the
			// body, so it is refused and nothing is claimed for alice.
			name: "ClaimForwardForAnotherUser",
			attack: func(t *testing.T, hs *haScreen, _ *haArena) *http.Response {
				signed := []byte(`{"login":"mallory","namespace":"` + hs.ns + `","pool":"scr"}`)
				res, err := http.DefaultClient.Do(claimForward(t, hs, signed, []byte(`{"login":"alice","namespace":"`+hs.ns+`","pool":"scr"}`)))
				must(t, err)
				return res
			},
			status: 401, says: "CORRAL_VDI_PEER_SECRET",
		},
		{
			// A signed-in user forwards a claim herself: refused.
			name: "UserForwardsAClaim",
			attack: func(t *testing.T, hs *haScreen, _ *haArena) *http.Response {
				req, err := http.NewRequest("POST", hs.reps["b"].p.URL+relay.PeerPath+"take", strings.NewReader(`{"login":"alice","namespace":"`+hs.ns+`","pool":"scr"}`))
				must(t, err)
				req.Header.Set("Tailscale-User-Login", "mallory")
				res, err := http.DefaultClient.Do(req)
				must(t, err)
				return res
			},
			status: 403, says: "Peer links are for peer portals",
		},
		{
			// The guest keeps from reading its line (a command that runs
			// for a minute, as a hostile or hung guest may) while alice
			// types 256 KiB ahead, so that her console's close waits
			// behind them at virt-handler: she closes it on a and opens it
			// on b, which gets the line once a has given up waiting for
			// the close to be read (5 s) rather than never or refused;
			// what virt-handler then kicks is a's client, given up.
			name: "GuestKeepsItsLineFromClosing",
			attack: func(t *testing.T, hs *haScreen, h *haArena) *http.Response {
				must(t, h.alice.WriteMessage(websocket.BinaryMessage, []byte("sleep 60; cat >/dev/null\r")))
				readUntil(h.alice, "/dev/null")
				line := strings.Repeat("x", 63) + "\r"
				for range 256 << 10 / (64 * 64) {
					must(t, h.alice.WriteMessage(websocket.BinaryMessage, []byte(strings.Repeat(line, 64))))
				}
				h.alice.Close()
				serial := "/ws/serial/" + hs.ns + "/" + hs.member
				ws, res, err := dialWS(hs.reps["b"].p, "alice", serial, hs.reps["b"].p.URL)
				if err != nil {
					t.Fatalf("alice's serial console on b, a's close unread: %v (%v); want it open once a gave up", err, status(res))
				}
				t.Cleanup(func() { ws.Close() })
				h.alice = ws
				return res
			},
			status: 101, opened: 1, kicked: 1,
		},
	}
}

// runHAAttacks opens alice's serial console on a, invites erin with
// control, and runs the rows.
func runHAAttacks(t *testing.T, hs *haScreen) {
	a := hs.reps["a"]
	if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+hs.ns+"/"+hs.member+"/shares", `{"user":"erin","control":true}`, nil); code != 201 && code != 200 {
		t.Fatalf("alice invites erin again, with control: %d", code)
	}
	ws, res, err := dialWS(a.p, "alice", "/ws/serial/"+hs.ns+"/"+hs.member, a.p.URL)
	if err != nil {
		t.Fatalf("alice's serial console on a: %v (%v)", err, status(res))
	}
	t.Cleanup(func() { ws.Close() })
	h := &haArena{alice: ws}
	var l coordinationv1.Lease
	must(t, hs.admin.Get(context.Background(), client.ObjectKey{Namespace: "corral-vdi", Name: "corral-vdi-serial." + hs.ns + "." + hs.member}, &l))
	if *l.Spec.HolderIdentity != a.identity {
		t.Fatalf("the serial Lease names %q; want a (%s), where alice's console is", *l.Spec.HolderIdentity, a.identity)
	}
	h.version = l.ResourceVersion
	for i, row := range haAttacks() {
		t.Run(row.name, func(t *testing.T) {
			before := hs.standIn.Consoles(hs.ns, hs.member, "console")
			res := row.attack(t, hs, h)
			if res == nil {
				t.Fatal("the row's attack returned no response")
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != row.status {
				t.Errorf("attack answered %d; want %d (%s)", res.StatusCode, row.status, body)
			}
			if row.says != "" && !strings.Contains(string(body), row.says) {
				t.Errorf("refusal does not say %q:\n%s", row.says, body)
			}
			word := "ro" + string(rune('a'+i)) + "w"
			must(t, h.alice.WriteMessage(websocket.BinaryMessage, []byte("echo "+word[:2]+"$((0))"+word[2:]+"\r")))
			if got := readUntil(h.alice, word[:2]+"0"+word[2:]); !strings.Contains(got, word[:2]+"0"+word[2:]) {
				t.Errorf("alice's serial console after the attack read %q; want it still hers", got)
			}
			if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != before.Opened+row.opened || n.Kicked != before.Kicked+row.kicked {
				t.Errorf("the VMI's serial console: %+v, before %+v; want %d clients more, %d kicked", n, before, row.opened, row.kicked)
			}
			if row.after != nil {
				row.after(t, hs, h)
			}
		})
	}
}

// unheldLineAttacks are the rows on an admin's own serial line of a
// member nobody holds (secondAdminWatches runs them while ops's holds
// it): another admin's joins it view only, and nobody else's does:
// mallory's, or erin's, invited by its last holder. Each is refused
// before any dial: the VMI's serial console sees no client more.
func unheldLineAttacks(t *testing.T, hs *haScreen, r *haReplica) {
	t.Helper()
	serial := "/ws/serial/" + hs.ns + "/" + hs.member
	for _, row := range []struct{ name, user string }{
		{"StrangerJoinsAnAdminsOwnLine", "mallory"},
		{"FormerInviteeJoinsAnAdminsOwnLine", "erin"},
	} {
		t.Run(row.name, func(t *testing.T) {
			before := hs.standIn.Consoles(hs.ns, hs.member, "console")
			_, res, _ := dialWS(r.p, row.user, serial, r.p.URL)
			if res == nil || res.StatusCode != 403 {
				t.Errorf("%s's serial console of the member nobody holds: %v; want 403", row.user, status(res))
			}
			if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n != before {
				t.Errorf("the VMI's serial console: %+v, before %+v; want no client more", n, before)
			}
		})
	}
}

// claimForward is a claim forward to replica b carrying body, signed with
// the peer secret for signed (relay.PeerPost's signature).
func claimForward(t *testing.T, hs *haScreen, signed, body []byte) *http.Request {
	b := hs.reps["b"].p.URL
	req, err := http.NewRequest("POST", b+relay.PeerPath+"take", bytes.NewReader(body))
	must(t, err)
	req.Header.Set(relay.PeerAuthHeader, relay.SignPeer([]byte(hs.secrets["corral-vdi-secrets/peer-secret"]), time.Now(), strings.TrimPrefix(b, "http://"),
		relay.BodyKind("take", signed), "", ""))
	return req
}
