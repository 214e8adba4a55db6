package e2e

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// The RDP token keys of the token rows: the portal signs with tokenKeyNew;
// tokenKeyOld was rotated out (and, say, leaked).
var (
	tokenKeyNew = strings.Repeat("n", 43) + "="
	tokenKeyOld = strings.Repeat("o", 43) + "="
	tokenEnv    = []string{"CORRAL_VDI_TOKEN_KEYS=" + tokenKeyNew}
)

// mintRDPToken makes an RDP token as a portal holding secret (base64)
// would: the attacker's copy of the format, so a change of it shows here.
func mintRDPToken(t *testing.T, secret, login, desktop string, expires time.Time) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hkdf.Key(sha256.New, raw, nil, "corral-vdi rdp token", 32)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(key)
	b, _ := json.Marshal(map[string]any{"u": login, "d": desktop, "e": expires.Unix(), "k": hex.EncodeToString(sum[:6])})
	payload := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("corral-rdp-v2:" + payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// rdpGateway opens alice's RDP websocket on her desktop, sends an
// RDCleanPath request carrying token, and returns the gateway's in-band
// answer as a response: an error PDU's HTTP status and message, or 200
// when the gateway connected to the desktop.
func (a *arena) rdpGateway(t *testing.T, token string) *http.Response {
	t.Helper()
	ws, res := a.rdpRequest(t, http.Header{"Tailscale-User-Login": {"alice"}}, token)
	if ws == nil {
		return res // refused before the upgrade
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, reply, err := ws.ReadMessage()
	must(t, err)
	return rdpAnswer(t, reply)
}

// rdpRequest opens the RDP gateway of alice's desktop with header h and
// sends an RDCleanPath request carrying token; a nil websocket means the
// portal refused before the upgrade, with res.
func (a *arena) rdpRequest(t *testing.T, h http.Header, token string) (*websocket.Conn, *http.Response) {
	t.Helper()
	ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/rdp/local/"+a.victim, h)
	if err != nil {
		return nil, res
	}
	x224 := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}
	req := relay.RDCleanPathPDU{Version: relay.RDCleanPathVersion, Destination: a.victim + ".local:3389", ProxyAuth: token, X224: x224}
	b, err := req.Marshal()
	must(t, err)
	must(t, ws.WriteMessage(websocket.BinaryMessage, b))
	return ws, res
}

// rdpAnswer reads the gateway's RDCleanPath reply as a response: an error
// PDU's HTTP status and message, or 200 when it connected to the desktop.
func rdpAnswer(t *testing.T, reply []byte) *http.Response {
	t.Helper()
	pdu, err := relay.UnmarshalRDCleanPath(reply)
	must(t, err)
	out := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("connected")), Header: http.Header{}}
	if pdu.Error != nil {
		out.StatusCode = int(pdu.Error.HTTPStatus)
		out.Body = io.NopCloser(strings.NewReader(pdu.Error.Error()))
	}
	return out
}

// rdpTokenAttacks are the rows for RDP tokens shared by replicas
// (CORRAL_VDI_TOKEN_KEYS): alice is the holder, so only the token stands
// between the request and her desktop's RDP server.
func rdpTokenAttacks() []attack {
	return []attack{
		{
			// A key rotated out (it leaked): tokens it signs open nothing,
			// though alice asks for her own desktop.
			name: "RDPTokenOfARotatedOutKey",
			env:  tokenEnv,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.rdpGateway(t, mintRDPToken(t, tokenKeyOld, "alice", "local/"+a.victim, time.Now().Add(time.Minute)))
			},
			// The refusal is in-band (an RDCleanPath error with HTTP 403);
			// the portal's log says which key the token named.
			status: 403,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				waitFor(t, 5*time.Second, "the portal logs a token of a key it lacks", func() bool {
					return strings.Contains(a.p.Log(), "must share CORRAL_VDI_TOKEN_KEYS")
				})
			},
		},
		{
			// The portal's key id with a signature of the attacker's own.
			name: "RDPTokenForgedUnderTheRightKeyID",
			env:  tokenEnv,
			attack: func(t *testing.T, a *arena) *http.Response {
				tok := mintRDPToken(t, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("m", 32))), "alice", "local/"+a.victim, time.Now().Add(time.Minute))
				good := mintRDPToken(t, tokenKeyNew, "alice", "local/"+a.victim, time.Now().Add(time.Minute))
				payload, _, _ := strings.Cut(good, ".") // the right key id and claims
				_, sig, _ := strings.Cut(tok, ".")
				return a.rdpGateway(t, payload+"."+sig)
			},
			status: 403,
		},
		{
			// A token the portal minted, its expiry pushed out by a day.
			name: "RDPTokenWithALaterExpiry",
			env:  tokenEnv,
			attack: func(t *testing.T, a *arena) *http.Response {
				good := mintRDPToken(t, tokenKeyNew, "alice", "local/"+a.victim, time.Now().Add(time.Minute))
				payload, sig, _ := strings.Cut(good, ".")
				b, _ := base64.RawURLEncoding.DecodeString(payload)
				var c map[string]any
				json.Unmarshal(b, &c)
				c["e"] = time.Now().Add(24 * time.Hour).Unix()
				b, _ = json.Marshal(c)
				return a.rdpGateway(t, base64.RawURLEncoding.EncodeToString(b)+"."+sig)
			},
			status: 403,
		},
		{
			// An admin opens the RDP websocket of alice's desktop on a
			// pool that asks her consent, with a good token of their
			// own, skipping the page: the gateway answers nothing and
			// dials nothing until alice does, and her refusal is the
			// answer (in-band HTTP 409), with no session opened.
			name: "AdminSkipsTheHoldersConsentOnRDP",
			env:  append([]string{"CORRAL_VDI_DISCONNECT_GRACE=16m"}, tokenEnv...), // an arena of its own
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy": {"watch": "consent"}}`, nil); code != 200 {
					t.Fatalf("demo pool watch consent: %d", code)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.rdpWatchUnasked(t, mintRDPToken(t, tokenKeyNew, admin, "local/"+a.victim, time.Now().Add(time.Minute)))
			},
			status: 409,
		},
		{
			// The control: a token of the current key opens alice's RDP,
			// so the rows above fail for the token and nothing else.
			name: "RDPTokenOfTheCurrentKeyConnects",
			env:  tokenEnv,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.rdpGateway(t, mintRDPToken(t, tokenKeyNew, "alice", "local/"+a.victim, time.Now().Add(time.Minute)))
			},
			status: 200, says: "connected", consoles: 1,
		},
	}
}

// rdpWatchUnasked opens the admin's RDP websocket of alice's desktop and
// sends an RDCleanPath request carrying token, straight from a client of
// its own. It fails the row if the gateway answers before alice has, or
// if alice is not asked; then alice refuses, and the gateway's answer is
// returned as rdpGateway's is.
func (a *arena) rdpWatchUnasked(t *testing.T, token string) *http.Response {
	t.Helper()
	ws, res := a.rdpRequest(t, http.Header{"Tailscale-User-Login": {admin}, "Origin": {"http://" + a.host}}, token)
	if ws == nil {
		return res // refused before the upgrade
	}
	defer ws.Close()
	replies := make(chan []byte, 1)
	go func() {
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, reply, _ := ws.ReadMessage()
		replies <- reply
	}()
	var asks []struct{ ID, User, Role string }
	waitFor(t, 5*time.Second, "alice is asked", func() bool {
		a.p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.victim+"/viewers", &asks)
		return len(asks) == 1 && asks[0].Role == "asks" && asks[0].User == admin
	})
	select {
	case reply := <-replies:
		t.Fatalf("the gateway answered the admin before alice did: %x", reply)
	case <-time.After(2 * time.Second):
	}
	if code := a.p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+a.victim+"/viewers/"+asks[0].ID+"/refuse", nil); code != 204 {
		t.Fatalf("alice refuses: %d", code)
	}
	return rdpAnswer(t, <-replies)
}
