package handlers

import (
	"bytes"
	"context"
	"encoding/asn1"
	"encoding/hex"
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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/console"
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
	h    *Handler
	db   *store.DB
	dir  string
	desk map[string]vdi.Ref // by holder
}

func mustRDPEnv(t *testing.T, holders ...string) *rdpEnv {
	t.Helper()
	st := mustRDPStack(t, "crdp", len(holders), nil)
	e := &rdpEnv{db: st.db, dir: st.dir, desk: map[string]vdi.Ref{}}
	for _, who := range holders {
		e.desk[who] = st.claim(t, who)
	}
	e.h = New(Config{Desktops: st.svc, Auth: st.authn, Sessions: st.db, Assets: st.assets, Log: st.log})
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	return e
}

// rdpStack is what a handler under test stands on: SQLite claims, the
// local backend's demo pool of real desktops (Xvnc + freerdp-shadow),
// Tailscale identity from loopback.
type rdpStack struct {
	svc     *vdi.Service
	backend *local.Backend
	authn   *auth.Authenticator
	assets  *static.Assets
	db      *store.DB
	dir     string
	log     *slog.Logger
}

// mustRDPStack builds an rdpStack with a demo pool of size desktops under
// a temporary directory named by prefix (short: the desktops' sockets live
// under it); wrap, if set, wraps the backend the service sees.
func mustRDPStack(t *testing.T, prefix string, size int, wrap func(*local.Backend) vdi.Backend) *rdpStack {
	t.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/usr/bin/freerdp-shadow-cli"); err != nil {
		t.Skip("freerdp-shadow-cli not installed (Debian package freerdp2-shadow-x11)")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	st := &rdpStack{dir: dir, log: slog.New(slog.DiscardHandler)}
	if st.db, err = store.Open(ctx, filepath.Join(dir, "portal.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.db.Close() })
	if st.backend, err = local.New(ctx, local.Config{DB: st.db, Dir: filepath.Join(dir, "local"), Log: st.log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.backend.StopAll(context.Background()) })
	if err := st.backend.EnsureDemoPool(ctx, size); err != nil {
		t.Fatal(err)
	}
	var b vdi.Backend = st.backend
	if wrap != nil {
		b = wrap(st.backend)
	}
	st.svc = vdi.NewService(vdi.Config{Backend: b, Leases: st.db.Leases(), Audit: st.db, Log: st.log})
	if st.authn, err = auth.New(auth.Config{Modes: []string{auth.ModeTailscale},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, KeyFile: filepath.Join(dir, "cookie.keys"), Log: st.log}); err != nil {
		t.Fatal(err)
	}
	if st.assets, err = static.New(); err != nil {
		t.Fatal(err)
	}
	return st
}

// claim claims a demo desktop for who.
func (st *rdpStack) claim(t *testing.T, who string) vdi.Ref {
	t.Helper()
	d, err := st.svc.Claim(context.Background(), vdi.Identity{Login: who}, local.Namespace, "demo")
	if err != nil {
		t.Fatal(err)
	}
	return d.Ref()
}

// connectAnswer is the /connect JSON as a client reads it.
type connectAnswer struct {
	Protocol    string           `json:"protocol"`
	WebSocket   string           `json:"websocket"`
	Token       string           `json:"token"`
	Destination string           `json:"destination"`
	Credentials *api.Credentials `json:"credentials"`
	Fallbacks   []struct {
		Protocol string `json:"protocol"`
	} `json:"fallbacks"`
}

func (e *rdpEnv) connect(t *testing.T, who string, ref vdi.Ref) connectAnswer {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/vdi/desktops/"+ref.String()+"/connect?protocol=rdp", nil)
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

// TestRDPGateway drives the gateway as IronRDP does, against real desktops
// with freerdp-shadow: tokens, sign-in, refusals and what is never dialled.
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
		if len(a.Fallbacks) == 0 || a.Fallbacks[0].Protocol != "vnc" {
			t.Errorf("fallbacks = %+v; want vnc next", a.Fallbacks)
		}
	})

	t.Run("TLSThenNLAGoodPassword", func(t *testing.T) {
		a := e.connect(t, "alice", alice)
		ws, resp := e.handshake(t, "alice", alice, a.Token, a.Destination)
		if resp.Error != nil || len(resp.ServerCertChain) == 0 {
			t.Fatalf("reply = %+v; want a successful response", resp)
		}
		// The NT hash of the password /connect showed, from the member's SAM
		// file (the hash is what NTLM needs).
		sam := readFileString(filepath.Join(e.dir, "local", "members", alice.Name, "run", "rdp.sam"))
		f := strings.Split(strings.TrimSpace(sam), ":")
		ntHash, err := hex.DecodeString(f[len(f)-4])
		if err != nil || len(ntHash) != 16 || f[0] != a.Credentials.Username {
			t.Fatalf("SAM file %q: %v", sam, err)
		}
		answer := credSSPSignIn(t, ws, resp.ServerCertChain[0], ntHash)
		var got tsReq
		if _, err := asn1.Unmarshal(answer, &got); err != nil || len(got.PubKeyAuth) == 0 || got.ErrorCode != 0 {
			t.Fatalf("server answered %x, %v; want its pubKeyAuth: sign-in accepted; server log:\n%s", answer, err,
				readFileString(filepath.Join(e.dir, "local", "members", alice.Name, "run", "freerdp-shadow.log")))
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

		// Plaintext now reaches the server through the gateway's TLS, and
		// NLA runs end to end: an NTLM AUTHENTICATE whose NTLMv2 proof was
		// not made with the password (what a wrong password produces).
		answer := credSSPSignIn(t, ws, resp.ServerCertChain[0], nil)
		if answer != nil {
			t.Fatalf("after a wrong password the client got %x; want the gateway to close", answer)
		}
		var err2 error
		for err2 == nil {
			_, _, err2 = ws.ReadMessage()
		}
		err = err2
		var ce *websocket.CloseError
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
		tokens := e.h.console.tokens
		e.h.console.tokens = tokens.WithClock(func() time.Time { return time.Now().Add(console.RDPTokenTTL + time.Second) })
		defer func() { e.h.console.tokens = tokens }()
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
		a = e.connect(t, "bob", bob)
		offered := []string{a.Protocol}
		for _, f := range a.Fallbacks {
			offered = append(offered, f.Protocol)
		}
		if a.Protocol != "vnc" || slices.Contains(offered, "rdp") {
			t.Errorf("connect without an RDP server offers %v; want vnc first and no rdp", offered)
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

// credSSPSignIn runs CredSSP over ws up to the client's proof of identity
// and returns the server's answer to it, or nil when the connection closed
// instead. With ntHash nil the proof is made without the password.
func credSSPSignIn(t *testing.T, ws *websocket.Conn, serverCert, ntHash []byte) []byte {
	t.Helper()
	ws.WriteMessage(websocket.BinaryMessage, mustTSRequest(t, tsReq{Version: 6, NegoTokens: []negoToken{{ntlmNegotiate()}}}))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("no CredSSP answer: %v", err)
	}
	var challenge tsReq
	if _, err := asn1.Unmarshal(b, &challenge); err != nil || len(challenge.NegoTokens) != 1 || !bytes.HasPrefix(challenge.NegoTokens[0].Token, []byte("NTLMSSP\x00\x02")) {
		t.Fatalf("server answered %x, %v; want a TSRequest with an NTLM CHALLENGE", b[:min(len(b), 32)], err)
	}
	auth, key := ntlmAuthenticate(t, challenge.NegoTokens[0].Token, local.RDPUser, ntHash)
	nonce := randomBytes(32)
	ws.WriteMessage(websocket.BinaryMessage, mustTSRequest(t, tsReq{Version: 6, NegoTokens: []negoToken{{auth}},
		PubKeyAuth: credSSPPubKeyAuth(t, key, nonce, serverCert), ClientNonce: nonce}))
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			return nil
		}
		var r tsReq
		if _, err := asn1.Unmarshal(b, &r); err == nil && r.ErrorCode != 0 {
			continue // the gateway's logon failure status, before it closes
		}
		return b
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
