package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/relay"
)

// haReplica is one portal process of the HA test, as one pod would run it.
type haReplica struct {
	name     string
	p        *Portal
	data     string
	env      []string
	identity string // in the reclaim leader election
}

var identityRE = regexp.MustCompile(`msg="kube backend".* identity=(\S+)`)

// startReplica runs the portal binary with env on data (its emptyDir) at
// listen and learns its election identity from its log.
func startReplica(t *testing.T, name, data, listen string, env []string) *haReplica {
	t.Helper()
	return startReplicaBin(t, binary, name, data, listen, env)
}

// startReplicaBin is startReplica with another build of the portal (bin).
func startReplicaBin(t *testing.T, bin, name, data, listen string, env []string) *haReplica {
	t.Helper()
	r := &haReplica{name: name, data: data, env: env}
	r.p = startPortalBin(t, bin, data, nil, append(append([]string{}, env...), "CORRAL_VDI_LISTEN="+listen, "CORRAL_VDI_DATA_DIR="+data)...)
	waitFor(t, 10*time.Second, name+"'s election identity in its log", func() bool {
		m := identityRE.FindStringSubmatch(r.p.Log())
		if m != nil {
			r.identity = m[1]
		}
		return m != nil
	})
	return r
}

// kill ends the replica with SIGKILL, as a node failure or the OOM killer
// would: no shutdown, no Lease released, no console closed.
func (r *haReplica) kill(t *testing.T) {
	t.Helper()
	must(t, r.p.cmd.Process.Signal(syscall.SIGKILL))
	r.p.cmd.Wait()
}

// haEnv renders deploy/ and returns the portal container's environment as
// its Deployment sets it, with the Secret's values and the test's own
// listen address, data dir and kubeconfig in place of a pod's.
func haEnv(t *testing.T, secrets map[string]string, kubeconfig string) []string {
	t.Helper()
	return haEnvFrom(t, filepath.Join("..", "deploy"), secrets, kubeconfig)
}

// haEnvFrom is haEnv with the Deployment of another deploy/ folder (a
// previous release's).
func haEnvFrom(t *testing.T, deploy string, secrets map[string]string, kubeconfig string) []string {
	t.Helper()
	objs, err := deploytest.Render(deploy)
	must(t, err)
	d, err := deploytest.Deployment(objs)
	must(t, err)
	env, err := deploytest.PortalEnv(d, deploytest.Values{
		Secrets: secrets,
		Fields:  map[string]string{"metadata.namespace": "corral-vdi"},
		Override: map[string]string{
			"CORRAL_VDI_ADMINS": "ops,ada",
			"HOME":              t.TempDir(),
			// A test's replicas stop with consoles open: drain briefly.
			"CORRAL_VDI_DRAIN_TIMEOUT": "2s",
			// Replicas on loopback ports: each one's listen address.
			"CORRAL_VDI_PEER_URL": "",
		},
	})
	must(t, err)
	return append(env, "KUBECONFIG="+kubeconfig,
		// Test clocks: reclaims checked every second, a short grace.
		"CORRAL_VDI_RECLAIM_INTERVAL=1s", "CORRAL_VDI_DISCONNECT_GRACE=20s")
}

// applyNamespacedRBAC applies the base's RBAC as `kubectl apply -k deploy`
// would (the portal's namespace and ServiceAccount, its cluster-scoped
// reads and leader Lease) and deploy/pool-namespace's Role and binding in
// each of pools, and nothing cluster-wide beyond that.
func applyNamespacedRBAC(t *testing.T, c *testcluster.Cluster, pools ...string) {
	t.Helper()
	objs, err := deploytest.Render(filepath.Join("..", "deploy"))
	must(t, err)
	var rbac []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if u.GetNamespace() != "corral-vdi-desktops" {
				rbac = append(rbac, u)
			}
		}
	}
	for _, ns := range pools {
		kit, err := deploytest.RenderPoolNamespace(filepath.Join("..", "deploy"), ns)
		must(t, err)
		rbac = append(rbac, kit...)
	}
	_, err = deploytest.Apply(c.Config, rbac, false)
	must(t, err)
}

// deploySecrets returns the keys of the Secret corral-vdi-secrets, as
// docs/operating.md has an operator make them, named as haEnv takes them
// ("corral-vdi-secrets/<key>").
func deploySecrets(t *testing.T) map[string]string {
	s := map[string]string{}
	for _, key := range []string{"session-keys", "token-keys", "peer-secret", "metrics-token"} {
		s["corral-vdi-secrets/"+key] = randomKey(t)
	}
	return s
}

func randomKey(t *testing.T) string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// reclaimLeader returns the identity holding the reclaim leader Lease.
func reclaimLeader(t *testing.T, admin client.Client) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "corral-vdi", Name: "corral-vdi-reclaimer"}, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// openVNCSession returns the id of alice's open VNC session on r, if any.
func openVNCSession(t *testing.T, r *haReplica, member string) string {
	t.Helper()
	for _, row := range csvRows(t, r.p, "/admin/history/sessions.csv") {
		if len(row) > 7 && row[1] == "alice" && row[3] == member && row[4] == "vnc" && row[7] == "" {
			return row[0]
		}
	}
	return ""
}

// sessionIDs returns the ids of alice's sessions of member on r.
func sessionIDs(t *testing.T, r *haReplica, member string) []string {
	t.Helper()
	var ids []string
	for _, row := range csvRows(t, r.p, "/admin/history/sessions.csv") {
		if len(row) > 7 && row[1] == "alice" && row[3] == member {
			ids = append(ids, row[0]+"/"+row[4])
		}
	}
	return ids
}

// rdpHandshake asks r's /connect for an RDP token as alice and runs the
// RDCleanPath handshake with it on gateway; it returns the gateway's reply.
func rdpHandshake(t *testing.T, minter, gateway *Portal, ns, member string) *relay.RDCleanPathPDU {
	t.Helper()
	var info struct {
		Protocol    string `json:"protocol"`
		Token       string `json:"token"`
		Destination string `json:"destination"`
		Fallbacks   []struct {
			Protocol string `json:"protocol"`
		} `json:"fallbacks"`
	}
	waitFor(t, 30*time.Second, "RDP offered on /connect", func() bool {
		code := minter.API(t, "alice", "GET", "/api/vdi/desktops/"+ns+"/"+member+"/connect?protocol=rdp", &info)
		return code == 200 && info.Protocol == "rdp" && info.Token != ""
	})
	ws, res, err := dialWS(gateway, "alice", "/ws/rdp/"+ns+"/"+member, gateway.URL)
	if err != nil {
		t.Fatalf("RDP websocket on %s: %v (%v)", gateway.URL, err, status(res))
	}
	defer ws.Close()
	x224 := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}
	req := relay.RDCleanPathPDU{Version: relay.RDCleanPathVersion, Destination: info.Destination, ProxyAuth: info.Token, X224: x224}
	b, err := req.Marshal()
	must(t, err)
	must(t, ws.WriteMessage(websocket.BinaryMessage, b))
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, reply, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("RDCleanPath reply from %s: %v", gateway.URL, err)
	}
	pdu, err := relay.UnmarshalRDCleanPath(reply)
	must(t, err)
	return pdu
}

// TestHA is the Deployment's promise on real parts: two portal processes
// on the kube backend (a real kube-apiserver, the KubeVirt stand-in with
// real Xvnc + freerdp-shadow guests), started with the environment
// deploy/'s Deployment sets and its Secret's keys, in the namespaced mode
// on two pool namespaces: the ServiceAccount has only the base's
// cluster-scoped reads and deploy/pool-namespace's Role in each, behind
// Debian's nginx balancing round-robin. A pool in a third namespace it
// was not given is refused in one line.
// Alice claims and opens VNC in Chromium through nginx; an RDP token
// minted by one replica opens RDP on the other; the replica carrying her
// console, which also leads the reclaim loop, is SIGKILLed; her console
// reconnects through the other, her claim holds, the leader moves, the
// disconnect grace still reclaims the desktop, and each replica's session
// history is intact. A replica started with other token keys is detected.
func TestHA(t *testing.T) {
	c := testcluster.MustStart(t)
	standIn := c.StartKubeVirtStandIn(t)
	admin := c.AdminClient(t)
	ns, ns2, ns3 := c.Namespace(t), c.Namespace(t), c.Namespace(t)
	applyNamespacedRBAC(t, c, ns, ns2)
	kubeconfig := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	secrets := deploySecrets(t)
	env := append(haEnv(t, secrets, kubeconfig), "CORRAL_VDI_POOL_NAMESPACES="+ns+","+ns2)
	t.Logf("replica environment from deploy/deployment.yaml: %s", strings.Join(redact(env), " "))

	// Replica a first, so that it leads; then b.
	dataA, err := os.MkdirTemp("", "cvha")
	must(t, err)
	t.Cleanup(func() { removeData(dataA) })
	a := startReplica(t, "a", dataA, "127.0.0.1:0", env)
	waitFor(t, 30*time.Second, "replica a leads the reclaim loop", func() bool { return reclaimLeader(t, admin) == a.identity })
	b := startReplica(t, "b", t.TempDir(), "127.0.0.1:0", env)
	for _, r := range []*haReplica{a, b} {
		if code := get(t, r.p.URL+"/readyz", nil); code != 200 {
			t.Fatalf("replica %s /readyz: %d; want 200 with every shared secret set; log:\n%s", r.name, code, r.p.Log())
		}
	}
	lb := MustStartNginx(t, a.p.URL, b.p.URL)
	api := lb.Portal()

	type guest struct{ vm, user, password string }
	guests := make(chan guest, 8)
	standIn.OnBoot(func(_, vm, _, user, password string) { guests <- guest{vm, user, password} })

	// The pool, through the balancer, as an admin.
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"ha","kind":"vm","mode":"persistent","source":"golden","size":1}`, ns)
	var perr apiError
	if code := api.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create pool: %d %+v", code, perr)
	}
	d := api.claimRunning(t, "alice", ns, "ha") // through nginx
	member := d.Name

	// The second pool namespace serves too; a third, which the portal was
	// not given (and has no Role in), is refused in one line before any
	// request reaches the API server.
	testcluster.StoppedVM(t, admin, ns2, "golden", nil)
	if code := api.CreatePool(t, "ops", strings.ReplaceAll(body, ns, ns2), &perr); code != 201 {
		t.Fatalf("create a pool in the second pool namespace %s: %d %+v", ns2, code, perr)
	}
	var d2 desktop
	if code := api.API(t, "bob", "POST", "/api/vdi/pools/"+ns2+"/ha/claim", &d2); code != 200 || d2.Namespace != ns2 {
		t.Fatalf("bob's claim in %s: %d %+v", ns2, code, d2)
	}
	testcluster.StoppedVM(t, admin, ns3, "golden", nil)
	code := api.APIBody(t, "ops", "POST", "/api/vdi/pools", strings.ReplaceAll(body, ns, ns3), &perr)
	if code != 404 || !strings.Contains(perr.Error, "Namespace "+ns3+" is not one of the portal's pool namespaces") || strings.Contains(perr.Error, "\n") {
		t.Fatalf("create a pool in %s, which the portal was not given: %d %+v; want 404 in one line", ns3, code, perr)
	}
	t.Logf("a pool in a third namespace: %d %s (%s)", code, perr.Error, perr.Hint)
	if code := api.API(t, "alice", "POST", "/api/vdi/pools/"+ns3+"/ha/claim", &perr); code != 404 {
		t.Fatalf("a claim in %s: %d %+v; want 404", ns3, code, perr)
	}

	// RDP across replicas: the token from a's /connect opens the gateway
	// on b, because both have the Secret's token keys.
	if pdu := rdpHandshake(t, a.p, b.p, ns, member); pdu.Error != nil || len(pdu.ServerCertChain) == 0 {
		t.Fatalf("RDP token minted by a, gateway b: %+v; want the server's certificate chain (connected)", pdu)
	}
	if pdu := rdpHandshake(t, b.p, a.p, ns, member); pdu.Error != nil || len(pdu.ServerCertChain) == 0 {
		t.Fatalf("RDP token minted by b, gateway a: %+v; want connected", pdu)
	}

	// RDP in Chromium through nginx: IronRDP asks /connect for a token and
	// opens the gateway in two requests, which round-robin sends to
	// different replicas.
	booted := <-guests
	rpage := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	if _, err := rpage.Goto(lb.User + "/desktops/" + ns + "/" + member); err != nil {
		t.Fatal(err)
	}
	ironrdp := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // compiles 6 MB of wasm first
	must(t, ironrdp.Locator(rpage.GetByTestId("rdp-username")).ToBeVisible())
	must(t, rpage.GetByTestId("rdp-username").Fill(booted.user))
	must(t, rpage.GetByTestId("rdp-password").Fill(booted.password))
	must(t, rpage.GetByTestId("rdp-password").Press("Enter"))
	must(t, ironrdp.Locator(rpage.GetByTestId("status")).ToHaveText("Connected"))
	drawnRDP(t, rpage, "through nginx")
	screenshot(t, rpage, "ha-rdp")
	rpage.Close() // nginx logs a websocket when it ends
	var connect, gateway string
	waitFor(t, 10*time.Second, "nginx logged the RDP websocket", func() bool {
		connect, gateway = lastUpstream(lb.AccessLog(), "/connect "), lastUpstream(lb.AccessLog(), "/ws/rdp/")
		return gateway != ""
	})
	t.Logf("IronRDP through nginx: /connect served by %s, the RDP websocket by %s", connect, gateway)

	// VNC in Chromium through nginx. Round-robin puts the websocket on
	// either replica; reload until it lands on a, the leader, so one kill
	// tests both hand-overs.
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	var browserLog []string
	page.OnConsole(func(m playwright.ConsoleMessage) { browserLog = append(browserLog, m.Type()+": "+m.Text()) })
	defer func() {
		if t.Failed() {
			screenshot(t, page, "ha-failed")
			t.Logf("browser console:\n%s", strings.Join(browserLog, "\n"))
		}
	}()
	consoleURL := lb.User + "/desktops/" + ns + "/" + member + "?protocol=vnc"
	var carrier string
	for try := 0; try < 8 && carrier != a.name; try++ {
		_, err := page.Goto(consoleURL)
		must(t, err)
		drawn(t, page, "ha-vnc")
		waitFor(t, 10*time.Second, "alice's VNC session open on one replica", func() bool {
			switch {
			case openVNCSession(t, a, member) != "":
				carrier = a.name
			case openVNCSession(t, b, member) != "":
				carrier = b.name
			}
			return carrier != ""
		})
		t.Logf("try %d: alice's VNC console is carried by replica %s", try+1, carrier)
		if carrier != a.name {
			_, err := page.Goto("about:blank") // closes the console
			must(t, err)
			waitFor(t, 10*time.Second, "the console closed", func() bool { return openVNCSession(t, b, member) == "" })
			carrier = ""
			// Round-robin is strict: one more request shifts which
			// replica the page's websocket lands on.
			get(t, lb.User+"/healthz", nil)
		}
	}
	if carrier != a.name {
		t.Fatalf("alice's console never landed on replica a in 8 tries; nginx log:\n%s", lb.AccessLog())
	}
	screenshot(t, page, "ha-before-kill")
	firstSession := openVNCSession(t, a, member)

	// SIGKILL a: the console drops, says so, and reconnects by itself
	// (with backoff) through nginx to b.
	killed := time.Now()
	a.kill(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, expect.Locator(page.GetByTestId("ended")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	drawn(t, page, "ha-after-kill")
	t.Logf("console drawn again through replica b %v after SIGKILL of a", time.Since(killed).Round(time.Millisecond))
	screenshot(t, page, "ha-reconnected")
	waitFor(t, 10*time.Second, "alice's VNC session open on b", func() bool { return openVNCSession(t, b, member) != "" })

	// The claim held: the same desktop, still alice's, from the survivor.
	var again desktop
	if code := api.API(t, "alice", "POST", "/api/vdi/pools/"+ns+"/ha/claim", &again); code != 200 || again.Name != member || again.Holder != "alice" {
		t.Fatalf("alice claiming again after the kill: %d %+v; want her %s back", code, again, member)
	}

	// The reclaim leader moves to b once a's leadership runs out.
	waitFor(t, 40*time.Second, "replica b leads the reclaim loop", func() bool { return reclaimLeader(t, admin) == b.identity })
	t.Logf("reclaim leader moved from a to b %v after the kill", time.Since(killed).Round(time.Millisecond))

	// The reclaim timer survives: alice closes her console; b (now the
	// leader) reclaims the desktop after the grace. a's console count on
	// the Lease is a dead replica's: it stops counting three heartbeats
	// after a's last one.
	_, err = page.Goto("about:blank")
	must(t, err)
	closed := time.Now()
	waitFor(t, 3*time.Minute, "the disconnect grace reclaims alice's desktop", func() bool {
		var all []desktop
		api.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all)
		for _, x := range all {
			if x.Name == member {
				return x.free()
			}
		}
		return false
	})
	since := time.Since(closed)
	t.Logf("reclaimed %v after the last console closed (grace 20s; a's stale count expires 90s after its last heartbeat)", since.Round(time.Millisecond))
	if since < 20*time.Second {
		t.Errorf("reclaimed %v after the console closed; want no sooner than the 20s grace", since)
	}
	if !auditHas(t, b.p, "", "reclaim", member, "disconnect-grace") {
		t.Errorf("b's audit log has no disconnect-grace reclaim of %s", member)
	}

	// Session history: each replica keeps its own (SQLite in its emptyDir).
	// a restarts on its data dir, as its container would in the same pod,
	// and still has the session it carried when it was killed.
	a = startReplica(t, "a", dataA, strings.TrimPrefix(a.p.URL, "http://"), env)
	if got := sessionIDs(t, a, member); !containsPrefix(got, firstSession+"/vnc") {
		t.Errorf("restarted a's sessions of %s: %v; want the one it carried when killed (%s)", member, got, firstSession)
	}
	if got := sessionIDs(t, b, member); len(got) == 0 {
		t.Errorf("b has no sessions of %s; want the reconnected console", member)
	}
	// The history page says whose history it shows.
	res, err := http.NewRequest("GET", lb.Open+"/admin/history", nil)
	must(t, err)
	res.Header.Set("Tailscale-User-Login", "ops")
	page2, err := http.DefaultClient.Do(res)
	must(t, err)
	html, _ := io.ReadAll(page2.Body)
	page2.Body.Close()
	if !strings.Contains(string(html), `data-testid="replica-note"`) || !(strings.Contains(string(html), a.identity) || strings.Contains(string(html), b.identity)) {
		t.Errorf("the history page through nginx does not say which replica's history it is")
	}

	// A replica with other token keys: found when it sees the leader's
	// key id, and the gateway refuses tokens of the others by name.
	other := map[string]string{}
	for k, v := range secrets {
		other[k] = v
	}
	other["corral-vdi-secrets/token-keys"] = randomKey(t)
	rogue := startReplica(t, "rogue", t.TempDir(), "127.0.0.1:0", append(haEnv(t, other, kubeconfig), "CORRAL_VDI_POOL_NAMESPACES="+ns+","+ns2))
	waitFor(t, 30*time.Second, "the rogue replica logs that its token keys differ from the leader's", func() bool {
		return strings.Contains(rogue.p.Log(), "replicas sign RDP tokens with different keys")
	})
	claim := api.claimRunning(t, "alice", ns, "ha")
	if pdu := rdpHandshake(t, b.p, rogue.p, ns, claim.Name); pdu.Error == nil || pdu.Error.HTTPStatus != http.StatusForbidden {
		t.Fatalf("b's RDP token on the rogue replica: %+v; want refused (403)", pdu.Error)
	}
	waitFor(t, 5*time.Second, "the rogue gateway names the foreign key", func() bool {
		return strings.Contains(rogue.p.Log(), "must share CORRAL_VDI_TOKEN_KEYS")
	})
	_ = standIn
}

// lastUpstream returns the replica (upstream address) that served the last
// request whose line in nginx's access log has path.
func lastUpstream(log, path string) string {
	up := ""
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, path) {
			if _, u, ok := strings.Cut(line, "upstream="); ok {
				up = u
			}
		}
	}
	return up
}

// containsPrefix reports whether one of list starts with prefix.
func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// redact hides the values of secret settings in env, for logs.
func redact(env []string) []string {
	out := make([]string, len(env))
	for i, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if strings.Contains(k, "KEYS") || strings.HasSuffix(k, "SECRET") || strings.HasSuffix(k, "TOKEN") {
			e = k + "=…"
		}
		out[i] = e
	}
	return out
}
