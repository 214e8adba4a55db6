package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/relay"
)

// TestHA_OneScreen: one screen per desktop across replicas, on real parts
// (haScreen: three replicas, the kube backend, the KubeVirt stand-in
// counting the VMI's VNC clients). Alice (the holder) on a, erin
// (invited with control) on b, carol (invited, view only) and ops (an
// admin) on c: one upstream, the same pixels everywhere, input from
// control clients only (also not through a signed view link straight to
// the owner); her serial console is shared the same way. Alice's page
// in Chromium opens on b and takes WebRTC, b's own port carrying the
// video of a's hub (webrtcElsewhere); then she reconnects on c: still
// one upstream. The owner is SIGKILLed: the clients
// reconnect, another replica takes the screen by compare-and-swap; the
// shared serial consoles relayed from b and c follow alice's to c without
// reopening, and carol's page in Chromium says it reconnects and shows the
// screen again by itself (followSerial, reconnected); then
// the new owner drains and stops, and the last replica takes it. Never
// were two upstreams at once.
func TestHA_OneScreen(t *testing.T) {
	rtc := haRTCEnv(t)
	hs := startHAScreen(t, rtc...)
	standIn, admin, ns, member, secrets := hs.standIn, hs.admin, hs.ns, hs.member, hs.secrets
	a, b, cr := hs.reps["a"], hs.reps["b"], hs.reps["c"]
	for _, inv := range []struct {
		user    string
		control bool
	}{{"erin", true}, {"carol", false}} {
		body := fmt.Sprintf(`{"user":%q,"control":%v}`, inv.user, inv.control)
		if code := cr.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+ns+"/"+member+"/shares", body, nil); code != 201 && code != 200 {
			t.Fatalf("alice invites %s: %d", inv.user, code)
		}
	}
	open := func(r *haReplica, user string) *rfbViewer {
		t.Helper()
		return hs.open(t, r, user)
	}
	upstreams := func(want int) {
		t.Helper()
		n := standIn.Consoles(ns, member, "vnc")
		if n.Opened != want || n.Kicked != 0 || n.Refused != 0 {
			t.Fatalf("the VMI's VNC console: %+v; want %d opened, none kicked or refused", n, want)
		}
	}
	same := func(what string, vs map[string]*rfbViewer) string {
		t.Helper()
		return sameScreen(t, what, vs)
	}
	// changed waits until every viewer sees a screen other than before,
	// and it stays for a second (the typed text all drawn).
	changed := func(what, before string, vs map[string]*rfbViewer) string {
		t.Helper()
		last := before
		for end := time.Now().Add(testwait.D(20 * time.Second)); time.Now().Before(end); time.Sleep(time.Second) {
			h := same(what, vs)
			if h != before && h == last {
				return h
			}
			last = h
		}
		t.Fatalf("%s: the screen did not change, or did not settle", what)
		return ""
	}

	viewers := map[string]*rfbViewer{"alice@a": open(a, "alice")}
	viewers["erin@b"] = open(b, "erin")
	viewers["carol@c"] = open(cr, "carol")
	viewers["ops@c"] = open(cr, "ops")
	upstreams(1)
	owner := screenOwner(t, admin, ns, member)
	if owner != a.identity {
		t.Fatalf("the screen's owner Lease names %q; want a (%s), where the first client was", owner, a.identity)
	}
	h := same("four clients on three replicas", viewers)

	// Input: erin's (control, through b's link) reaches the desktop;
	// carol's (view) does not, nor a view link's signed straight to a.
	viewers["erin@b"].typeText(t, "echo shared")
	h = changed("erin typed", h, viewers)
	viewers["carol@c"].typeText(t, "rm -rf x")
	rogue := screenLinkWS(t, a, secrets["corral-vdi-secrets/peer-secret"], relay.ScreenView, ns, member)
	rogue.typeText(t, "reboot")
	time.Sleep(2 * time.Second)
	if got := same("view-only clients typed", viewers); got != h {
		t.Errorf("the screen changed after view-only clients typed; want their keys dropped")
	}
	upstreams(1)

	// Alice's console moves to b, her page in Chromium taking WebRTC from
	// b, then to c (a reload, a second tab): the same one upstream,
	// through a's hub.
	viewers["alice@a"].ws.Close()
	delete(viewers, "alice@a")
	if rtc != nil {
		webrtcElsewhere(t, hs, b, a)
		upstreams(1)
	}
	// Her serial console, shared across replicas too (opened after the
	// WebRTC page, which can take longer than the portal waits for an
	// idle console's pong, 40 s, on a loaded machine: these raw consoles
	// answer pings only while the test reads them): alice opens it on
	// a, carol (view) joins on c and erin (control) on b over stream links;
	// erin's command runs and everyone reads its output, carol's keys go
	// nowhere. Their consoles stay open through a's SIGKILL below.
	serial := "/ws/serial/" + ns + "/" + member
	term := func(r *haReplica, user string) *websocket.Conn {
		t.Helper()
		ws, res, err := dialWS(r.p, user, serial, r.p.URL)
		if err != nil {
			t.Fatalf("%s's serial console on %s: %v (%v)", user, r.name, err, status(res))
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	aliceSerial := term(a, "alice")
	carolSerial, erinSerial := term(cr, "carol"), term(b, "erin")
	must(t, carolSerial.WriteMessage(websocket.BinaryMessage, []byte("echo vi$((2*3))ew\r")))
	must(t, erinSerial.WriteMessage(websocket.BinaryMessage, []byte("echo sh$((6*7))ared\r")))
	for who, ws := range map[string]*websocket.Conn{"alice@a": aliceSerial, "carol@c": carolSerial, "erin@b": erinSerial} {
		if got := readUntil(ws, "sh42ared"); !strings.Contains(got, "sh42ared") || strings.Contains(got, "vi6ew") {
			t.Errorf("%s's serial console read %q; want erin's command's output (sh42ared) and nothing of carol's (vi6ew)", who, got)
		}
	}
	if n := standIn.Consoles(ns, member, "console"); n.Opened != 1 || n.Kicked != 0 {
		t.Errorf("the VMI's serial console: %+v; want 1 opened (alice's), none kicked", n)
	}

	viewers["alice@c"] = open(cr, "alice")
	same("alice reconnected on c", viewers)
	upstreams(1)
	rogue.ws.Close()
	page := carolsPage(t, hs, cr) // it records what it says from now on

	// SIGKILL the owner: the relayed consoles end; reopened, they find a
	// new owner once a's heartbeat runs out, and one upstream again.
	// Carol's page says it reconnects, and does, by itself.
	killed := time.Now()
	a.kill(t)
	for who, v := range viewers {
		if _, err := v.screen(t); err == nil {
			t.Fatalf("%s's console still shows a screen after its owner was killed; want it closed", who)
		}
	}
	viewers = map[string]*rfbViewer{"erin@b": open(b, "erin")}
	first := time.Since(killed)
	followSerial(t, hs, cr, erinSerial, carolSerial)
	reconnected(t, page, 60*time.Second)
	t.Logf("carol's page drew the screen again %v after the owner's SIGKILL", time.Since(killed).Round(time.Millisecond))
	viewers["alice@c"] = open(cr, "alice")
	viewers["carol@c"] = open(cr, "carol")
	viewers["ops@b"] = open(b, "ops")
	h = same("after the owner's SIGKILL", viewers)
	t.Logf("a console's first screen %v after the owner's SIGKILL", first.Round(time.Millisecond))
	upstreams(2)
	if owner := screenOwner(t, admin, ns, member); owner != b.identity && owner != cr.identity {
		t.Fatalf("after the kill the owner Lease names %q; want b or c", owner)
	}
	viewers["erin@b"].typeText(t, " again")
	changed("erin typed after the failover", h, viewers)
	upstreams(2)

	// The new owner drains and stops (SIGTERM, a rolling update): its
	// consoles end with the drain, carol's page saying that the screen
	// moves (relayed to it, or on it); reopened on the last replica, which
	// takes the screen at once (the stopped one's heartbeat is gone).
	owner = screenOwner(t, admin, ns, member)
	stopping, last := b, cr
	if owner == cr.identity {
		stopping, last = cr, b
	}
	stopped := time.Now()
	stopping.p.Stop(t)
	saysMoved(t, page, 30*time.Second)
	viewers = map[string]*rfbViewer{"alice@" + last.name: open(last, "alice"), "erin@" + last.name: open(last, "erin")}
	same("after the owner drained and stopped", viewers)
	t.Logf("a console's first screen %v after the owner's SIGTERM (drain 2s)", time.Since(stopped).Round(time.Millisecond))
	upstreams(3)
	if got := screenOwner(t, admin, ns, member); got != last.identity {
		t.Fatalf("after %s stopped the owner Lease names %q; want %s (%s)", stopping.name, got, last.name, last.identity)
	}
}

// screenOwner returns the replica the screen Lease of ns/member names.
func screenOwner(t *testing.T, admin client.Client, ns, member string) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "corral-vdi", Name: "corral-vdi-screen." + ns + "." + member}, &l); err != nil {
		t.Fatalf("the screen Lease of %s/%s: %v", ns, member, err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// screenLinkWS opens a screen link to r in role, signed with secret, as a
// replica would, and shakes RFB hands over it.
func screenLinkWS(t *testing.T, r *haReplica, secret, role, ns, member string) *rfbViewer {
	t.Helper()
	host := strings.TrimPrefix(r.p.URL, "http://")
	h := http.Header{relay.PeerAuthHeader: {relay.SignPeer([]byte(secret), time.Now(), host, relay.ScreenLink(role), ns, member)}}
	ws, res, err := websocket.DefaultDialer.Dial("ws://"+host+relay.PeerPath+"screen/"+role+"/"+ns+"/"+member, h)
	if err != nil {
		t.Fatalf("a %s screen link to %s: %v (%v)", role, r.name, err, status(res))
	}
	t.Cleanup(func() { ws.Close() })
	return newRFBViewer(t, ws)
}

// readUntil reads a console websocket until its text has want or 10 s
// pass, and returns the text.
func readUntil(ws *websocket.Conn, want string) string {
	var got []byte
	ws.SetReadDeadline(time.Now().Add(testwait.D(10 * time.Second)))
	for !strings.Contains(string(got), want) {
		_, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		got = append(got, b...)
	}
	return string(got)
}
