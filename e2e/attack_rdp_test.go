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
	h := http.Header{"Tailscale-User-Login": {"alice"}}
	ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/rdp/local/"+a.victim, h)
	if err != nil {
		return res // refused before the upgrade
	}
	defer ws.Close()
	x224 := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}
	req := relay.RDCleanPathPDU{Version: relay.RDCleanPathVersion, Destination: a.victim + ".local:3389", ProxyAuth: token, X224: x224}
	b, err := req.Marshal()
	must(t, err)
	must(t, ws.WriteMessage(websocket.BinaryMessage, b))
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, reply, err := ws.ReadMessage()
	must(t, err)
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
