package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/asn1"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/static"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// rdpEnv is the real portal stack behind httptest: SQLite claims, the local
// backend with real desktops (Xvnc + freerdp-shadow), Tailscale identity.
type rdpEnv struct {
	srv  *httptest.Server
	db   *store.DB
	dir  string
	desk map[string]vdi.Ref // by holder
}

func mustRDPEnv(t *testing.T, holders ...string) *rdpEnv {
	t.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/usr/bin/freerdp-shadow-cli"); err != nil {
		t.Skip("freerdp-shadow-cli not installed (Debian package freerdp2-shadow-x11)")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crdp") // short: desktops' sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	log := slog.New(slog.DiscardHandler)
	db, err := store.Open(ctx, filepath.Join(dir, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	backend, err := local.New(ctx, local.Config{DB: db, Dir: filepath.Join(dir, "local"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.StopAll(context.Background()) })
	if err := backend.EnsureDemoPool(ctx, len(holders)); err != nil {
		t.Fatal(err)
	}
	svc := vdi.NewService(vdi.Config{Backend: backend, Leases: db.Leases(), Audit: db, Log: log})
	authn, err := auth.New(auth.Config{Modes: []string{auth.ModeTailscale},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, KeyFile: filepath.Join(dir, "cookie.keys"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	e := &rdpEnv{db: db, dir: dir, desk: map[string]vdi.Ref{}}
	for _, who := range holders {
		d, err := svc.Claim(ctx, vdi.Identity{Login: who}, local.Namespace, "demo")
		if err != nil {
			t.Fatal(err)
		}
		e.desk[who] = d.Ref()
	}
	e.srv = httptest.NewServer(New(Config{Desktops: svc, Auth: authn, Sessions: db, Assets: assets, Log: log}))
	t.Cleanup(e.srv.Close)
	return e
}

// connectAnswer is the /connect JSON as a client reads it.
type connectAnswer struct {
	Protocol    string          `json:"protocol"`
	WebSocket   string          `json:"websocket"`
	Token       string          `json:"token"`
	Destination string          `json:"destination"`
	Credentials *rdpCredentials `json:"credentials"`
	Fallbacks   []struct {
		Protocol string `json:"protocol"`
	} `json:"fallbacks"`
}

func (e *rdpEnv) connect(t *testing.T, who string, ref vdi.Ref) connectAnswer {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/vdi/desktops/"+ref.String()+"/connect", nil)
	req.Header.Set(auth.HeaderTailscaleLogin, who)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a connectAnswer
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != 200 {
		t.Fatalf("connect as %s: %d %v", who, res.StatusCode, err)
	}
	return a
}

// dialGateway opens the RDP websocket of ref as who.
func (e *rdpEnv) dialGateway(t *testing.T, who string, ref vdi.Ref) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{auth.HeaderTailscaleLogin: {who}}
	ws, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.srv.URL, "http")+"/ws/rdp/"+ref.String(), h)
	if err == nil {
		ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		t.Cleanup(func() { ws.Close() })
	}
	return ws, res, err
}

// x224Request is an X.224 Connection Request asking for TLS or CredSSP.
var x224Request = []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}

// handshake sends an RDCleanPath request and returns the reply.
func (e *rdpEnv) handshake(t *testing.T, who string, ref vdi.Ref, token, destination string) (*websocket.Conn, *relay.RDCleanPathPDU) {
	t.Helper()
	ws, _, err := e.dialGateway(t, who, ref)
	if err != nil {
		t.Fatal(err)
	}
	req := relay.RDCleanPathPDU{Version: relay.RDCleanPathVersion, Destination: destination, ProxyAuth: token, X224: x224Request}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteMessage(websocket.BinaryMessage, b)
	_, b, err = ws.ReadMessage()
	if err != nil {
		t.Fatalf("read RDCleanPath reply: %v", err)
	}
	resp, err := relay.UnmarshalRDCleanPath(b)
	if err != nil {
		t.Fatal(err)
	}
	return ws, resp
}

func wantRefusal(t *testing.T, ws *websocket.Conn, resp *relay.RDCleanPathPDU, want relay.RDCleanPathError) {
	t.Helper()
	if resp.Error == nil || *resp.Error != want {
		t.Fatalf("reply = %+v (error %+v); want error %+v", resp, resp.Error, want)
	}
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the error PDU: %v; want a normal close", err)
	}
}

func TestRDPGateway(t *testing.T) {
	// Registered first, so it runs after every other cleanup has closed
	// the server, the desktops and the database: nothing may be left.
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, leaks)
	})
	e := mustRDPEnv(t, "alice", "bob")
	alice, bob := e.desk["alice"], e.desk["bob"]

	t.Run("ConnectOffersRDPFirst", func(t *testing.T) {
		a := e.connect(t, "alice", alice)
		if a.Protocol != "rdp" || a.WebSocket != "/ws/rdp/"+alice.String() || a.Token == "" || a.Destination != rdpDestination(alice) {
			t.Fatalf("connect = %+v; want rdp first with a token and destination", a)
		}
		if a.Credentials == nil || a.Credentials.Username != local.RDPUser || len(a.Credentials.Password) < 16 {
			t.Errorf("credentials = %+v; want the desktop's sign-in for its holder", a.Credentials)
		}
		if len(a.Fallbacks) != 1 || a.Fallbacks[0].Protocol != "vnc" {
			t.Errorf("fallbacks = %+v; want vnc", a.Fallbacks)
		}
	})

	t.Run("TLSThenNLAWrongPassword", func(t *testing.T) {
		begin := time.Now()
		a := e.connect(t, "alice", alice)
		ws, resp := e.handshake(t, "alice", alice, a.Token, a.Destination)
		if resp.Error != nil || resp.Version != relay.RDCleanPathVersion || resp.ServerAddr != "127.0.0.1:3389" {
			t.Fatalf("reply = %+v; want a successful response", resp)
		}
		if cc := resp.X224; len(cc) != 19 || cc[5] != 0xd0 || cc[11] != 2 || cc[15] != 2 {
			t.Fatalf("X.224 confirm % x; want a negotiation response selecting CredSSP (HYBRID)", cc)
		}
		t.Logf("RDCleanPath handshake (token check, dial, X.224, TLS) in %v", time.Since(begin).Round(time.Millisecond))
		// The leaf is the certificate freerdp-shadow made in the member's RDP home.
		crt, err := os.ReadFile(filepath.Join(e.dir, "local", "members", alice.Name, "run", "rdp-home", ".config", "freerdp", "shadow", "shadow.crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(crt)
		if len(resp.ServerCertChain) == 0 || block == nil || !bytes.Equal(resp.ServerCertChain[0], block.Bytes) {
			t.Errorf("certificate chain does not start with the server's certificate")
		}

		// Plaintext now reaches the server through the gateway's TLS: an
		// NTLM NEGOTIATE in a CredSSP TSRequest gets the server's CHALLENGE.
		ws.WriteMessage(websocket.BinaryMessage, mustTSRequest(t, tsReq{Version: 6, NegoTokens: []negoToken{{ntlmNegotiate()}}}))
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("no CredSSP answer: %v", err)
		}
		var answer tsReq
		if _, err := asn1.Unmarshal(b, &answer); err != nil || len(answer.NegoTokens) != 1 || !bytes.HasPrefix(answer.NegoTokens[0].Token, []byte("NTLMSSP\x00\x02")) {
			t.Fatalf("server answered %x, %v; want a TSRequest with an NTLM CHALLENGE", b[:min(len(b), 32)], err)
		}
		// An AUTHENTICATE whose NTLMv2 proof was not made with the password:
		// what a wrong password produces. The gateway must say so.
		wrong := ntlmAuthenticate(t, answer.NegoTokens[0].Token, local.RDPUser)
		ws.WriteMessage(websocket.BinaryMessage, mustTSRequest(t, tsReq{Version: 6, NegoTokens: []negoToken{{wrong}}, PubKeyAuth: randomBytes(48), ClientNonce: randomBytes(32)}))
		var ce *websocket.CloseError
		for err == nil {
			_, _, err = ws.ReadMessage()
		}
		if !errors.As(err, &ce) || ce.Code != relay.CloseRDPLogonFailed || ce.Text != "wrong user name or password" {
			t.Fatalf("after a wrong password: %v; want close %d", err, relay.CloseRDPLogonFailed)
		}
		if log := readFileString(filepath.Join(e.dir, "local", "members", alice.Name, "run", "freerdp-shadow.log")); !strings.Contains(log, "NtProofString verification failed") {
			t.Errorf("freerdp-shadow's log does not show it checked and refused the NTLM proof:\n%s", log)
		}
		// The attempt is a recorded session, and its reason says why it ended.
		if !eventually(3*time.Second, func() bool {
			ss, _ := e.db.Sessions(context.Background(), 10)
			for _, s := range ss {
				if s.Login == "alice" && s.Protocol == "rdp" && !s.ClosedAt.IsZero() && strings.Contains(s.CloseReason, "wrong user name or password") {
					return true
				}
			}
			return false
		}) {
			ss, _ := e.db.Sessions(context.Background(), 10)
			t.Errorf("sessions = %+v; want alice's rdp session closed for a wrong password", ss)
		}
	})

	t.Run("ForgedToken", func(t *testing.T) {
		a := e.connect(t, "alice", alice)
		forged := []byte(a.Token)
		forged[len(forged)-2] ^= 1
		ws, resp := e.handshake(t, "alice", alice, string(forged), a.Destination)
		wantRefusal(t, ws, resp, relay.RDCleanPathError{Code: 1, HTTPStatus: 403})
	})

	t.Run("ExpiredToken", func(t *testing.T) {
		a := e.connect(t, "alice", alice)
		rdpTokenIssuer.now = func() time.Time { return time.Now().Add(rdpTokenTTL + time.Second) }
		defer func() { rdpTokenIssuer.now = time.Now }()
		ws, resp := e.handshake(t, "alice", alice, a.Token, a.Destination)
		wantRefusal(t, ws, resp, relay.RDCleanPathError{Code: 1, HTTPStatus: 401})
	})

	t.Run("AnotherUsersToken", func(t *testing.T) {
		a := e.connect(t, "alice", alice)
		ws, resp := e.handshake(t, "bob", bob, a.Token, rdpDestination(bob))
		wantRefusal(t, ws, resp, relay.RDCleanPathError{Code: 1, HTTPStatus: 403})
	})

	t.Run("AnotherUsersDesktop", func(t *testing.T) {
		_, res, err := e.dialGateway(t, "bob", alice)
		if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("bob opening alice's RDP: %v (%v); want HTTP 403 before any upgrade", err, res)
		}
	})

	t.Run("DestinationIsNeverDialled", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}()
		a := e.connect(t, "alice", alice)
		ws, resp := e.handshake(t, "alice", alice, a.Token, ln.Addr().String())
		wantRefusal(t, ws, resp, relay.RDCleanPathError{Code: 1, HTTPStatus: 400})
		select {
		case <-accepted:
			t.Fatal("the gateway connected to the request's destination")
		case <-time.After(300 * time.Millisecond):
		}
	})

	t.Run("ServerGone", func(t *testing.T) {
		a := e.connect(t, "bob", bob)
		killShadow(t, filepath.Join(e.dir, "local", "members", bob.Name, "run"))
		ws, resp := e.handshake(t, "bob", bob, a.Token, a.Destination)
		wantRefusal(t, ws, resp, relay.RDCleanPathError{Code: 1, HTTPStatus: 502})
		if a := e.connect(t, "bob", bob); a.Protocol != "vnc" || len(a.Fallbacks) != 0 {
			t.Errorf("connect without an RDP server = %+v; want vnc only", a)
		}
	})
}

// killShadow kills the freerdp-shadow the backend started for a member, by
// the PID it recorded.
func killShadow(t *testing.T, runDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Procs []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		} `json:"procs"`
	}
	json.Unmarshal(b, &rec)
	for _, p := range rec.Procs {
		if p.Name == "freerdp-shadow" {
			proc, _ := os.FindProcess(p.PID)
			proc.Kill()
			sock := filepath.Join(runDir, "rdp.sock")
			if !eventually(3*time.Second, func() bool {
				c, err := net.Dial("unix", sock)
				if err == nil {
					c.Close()
				}
				return err != nil
			}) {
				t.Fatal("freerdp-shadow still answers after SIGKILL")
			}
			return
		}
	}
	t.Fatal("no freerdp-shadow recorded")
}

func eventually(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

// tsReq is a CredSSP TSRequest ([MS-CSSP] 2.2.1).
type tsReq struct {
	Version     int         `asn1:"explicit,tag:0"`
	NegoTokens  []negoToken `asn1:"optional,explicit,tag:1"`
	AuthInfo    []byte      `asn1:"optional,explicit,tag:2"`
	PubKeyAuth  []byte      `asn1:"optional,explicit,tag:3"`
	ErrorCode   int64       `asn1:"optional,explicit,tag:4"`
	ClientNonce []byte      `asn1:"optional,explicit,tag:5"`
}

type negoToken struct {
	Token []byte `asn1:"explicit,tag:0"`
}

func mustTSRequest(t *testing.T, r tsReq) []byte {
	t.Helper()
	b, err := asn1.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// NTLM flags the test client asks for ([MS-NLMP] 2.2.2.5).
const ntlmFlags = 0x00000001 | 0x00000004 | 0x00000010 | 0x00000020 | 0x00000200 | 0x00008000 |
	0x00080000 | 0x00800000 | 0x02000000 | 0x20000000 | 0x40000000 | 0x80000000

// ntlmNegotiate is an NTLM NEGOTIATE_MESSAGE without domain or workstation.
func ntlmNegotiate() []byte {
	b := append([]byte("NTLMSSP\x00"), 1, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, ntlmFlags)
	b = append(b, make([]byte, 16)...) // empty domain and workstation fields
	return append(b, 6, 1, 0, 0, 0, 0, 0, 15)
}

// ntlmAuthenticate is a well-formed NTLMv2 AUTHENTICATE_MESSAGE for user
// answering challenge, whose NTProofStr is random: the server cannot tell it
// from one computed with a wrong password.
func ntlmAuthenticate(t *testing.T, challenge []byte, user string) []byte {
	t.Helper()
	if len(challenge) < 48 {
		t.Fatalf("NTLM CHALLENGE of %d bytes", len(challenge))
	}
	tiLen := int(binary.LittleEndian.Uint16(challenge[40:]))
	tiOff := int(binary.LittleEndian.Uint32(challenge[44:]))
	if tiOff+tiLen > len(challenge) {
		t.Fatal("NTLM CHALLENGE target info out of bounds")
	}
	ts := binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()/100+116444736000000000))
	blob := append([]byte{1, 1, 0, 0, 0, 0, 0, 0}, ts...)
	blob = append(blob, randomBytes(8)...)
	blob = append(blob, 0, 0, 0, 0)
	blob = append(blob, challenge[tiOff:tiOff+tiLen]...)
	blob = append(blob, 0, 0, 0, 0)
	fields := [][]byte{
		make([]byte, 24),                 // LM response
		append(randomBytes(16), blob...), // NT response: NTProofStr + blob
		nil,                              // domain
		utf16le(user),                    // user
		utf16le("TEST"),                  // workstation
		randomBytes(16),                  // encrypted random session key
	}
	b := append([]byte("NTLMSSP\x00"), 3, 0, 0, 0)
	off := 88
	var payload []byte
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = binary.LittleEndian.AppendUint32(b, uint32(off+len(payload)))
		payload = append(payload, f...)
	}
	b = binary.LittleEndian.AppendUint32(b, ntlmFlags)
	b = append(b, 6, 1, 0, 0, 0, 0, 0, 15) // version
	b = append(b, make([]byte, 16)...)     // MIC (not asked for)
	return append(b, payload...)
}

func utf16le(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
