package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/static"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestProbeCache(t *testing.T) {
	var c probeCache
	k := probeKey{vdi.Ref{Namespace: "local", Name: "demo-1"}, vdi.ProtocolRDP, time.Now().UnixMicro()}
	t0 := time.Now()
	if _, ok := c.get(k, t0); ok {
		t.Fatal("get on an empty cache found a result")
	}
	c.put(k, probeResult{ok: true, at: t0})
	if r, ok := c.get(k, t0.Add(probeTTL-time.Second)); !ok || !r.ok {
		t.Errorf("get within the TTL = %v, %v; want the cached success", r, ok)
	}
	if _, ok := c.get(k, t0.Add(probeTTL+time.Second)); ok {
		t.Error("get after the TTL found a result; want a fresh probe")
	}
	// Expired entries go when new ones come.
	k2 := probeKey{k.ref, vdi.ProtocolSerial, k.claimed}
	c.put(k2, probeResult{at: t0.Add(2 * probeTTL)})
	if len(c.m) != 1 {
		t.Errorf("cache holds %d entries after an expired one; want 1", len(c.m))
	}
	// A new claim of the member, or a start or stop, is probed afresh.
	c.put(k, probeResult{ok: true, at: t0.Add(2 * probeTTL)})
	if _, ok := c.get(probeKey{k.ref, k.p, k.claimed + 1}, t0.Add(2*probeTTL)); ok {
		t.Error("get under a new claim found the old claim's result")
	}
	c.forget(k.ref)
	if len(c.m) != 0 {
		t.Errorf("cache holds %d entries after forget; want 0", len(c.m))
	}
}

// TestProbeCache_InFlight: a second asker of a probe under way waits for
// its answer (the console page's /connect for the probe its claim started)
// instead of probing again.
func TestProbeCache_InFlight(t *testing.T) {
	var c probeCache
	k := probeKey{vdi.Ref{Namespace: "local", Name: "demo-1"}, vdi.ProtocolRDP, 1}
	call, mine := c.begin(k)
	if !mine {
		t.Fatal("begin on an idle key: mine = false; want the caller to probe")
	}
	again, mine := c.begin(k)
	if mine || again != call {
		t.Fatalf("begin under way: mine = %v, same call = %v; want false, true", mine, again == call)
	}
	select {
	case <-again.done:
		t.Fatal("done before end")
	default:
	}
	c.end(k, call, probeResult{ok: true}, true)
	<-again.done
	if !again.res.ok || !again.learned {
		t.Errorf("waiter got %+v, learned %v; want the prober's success", again.res, again.learned)
	}
	if _, mine := c.begin(k); !mine {
		t.Error("begin after end: mine = false; want a new probe")
	}
}

func TestOffers(t *testing.T) {
	d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "demo-1", Power: vdi.PowerRunning,
		Protocols: []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC, vdi.ProtocolTerminal}}}
	tests := []struct {
		power vdi.Power
		p     vdi.Protocol
		code  vdi.Code
	}{
		{vdi.PowerRunning, vdi.ProtocolTerminal, ""},
		{vdi.PowerRunning, vdi.ProtocolSerial, vdi.EInvalid},
		{vdi.PowerStopped, vdi.ProtocolVNC, vdi.EUnavailable},
	}
	for _, tt := range tests {
		d.Power = tt.power
		err := offers(d, tt.p)
		var e *vdi.Error
		if got := vdi.Code(""); errors.As(err, &e) {
			got = e.Code
			if got != tt.code {
				t.Errorf("offers(%s, %s) = %v; want code %q", tt.power, tt.p, err, tt.code)
			}
		} else if err != nil || tt.code != "" {
			t.Errorf("offers(%s, %s) = %v; want code %q", tt.power, tt.p, err, tt.code)
		}
	}
}

// unreachableRDP is the local backend as a portal outside the desktop's
// network sees it: the RDP server does not answer on the direct path.
type unreachableRDP struct{ *local.Backend }

func (b unreachableRDP) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	if p == vdi.ProtocolRDP {
		return nil, errors.New("dial tcp 10.0.0.7:3389: i/o timeout")
	}
	return b.Backend.Dial(ctx, ref, p)
}

// backendPath is a fallback path that does reach the desktop, as the
// apiserver's port forward reaches a VM's RDP server.
type backendPath struct{ b vdi.Backend }

func (p backendPath) Name() string { return console.PathAPIServer }

func (p backendPath) Dial(ctx context.Context, ref vdi.Ref, proto vdi.Protocol) (net.Conn, error) {
	return p.b.Dial(ctx, ref, proto)
}

// TestConnectRDPThroughFallback checks that an RDP server only a fallback
// path reaches is still offered first by /connect, that the gateway
// relays through that path, and that the session records it. Without the
// fallback, the same desktop offers VNC first.
func TestConnectRDPThroughFallback(t *testing.T) {
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/usr/bin/freerdp-shadow-cli"); err != nil {
		t.Skip("freerdp-shadow-cli not installed (Debian package freerdp2-shadow-x11)")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cfb") // short: desktops' sockets live under it
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
	if err := backend.EnsureDemoPool(ctx, 1); err != nil {
		t.Fatal(err)
	}
	svc := vdi.NewService(vdi.Config{Backend: unreachableRDP{backend}, Leases: db.Leases(), Audit: db, Log: log})
	authn, err := auth.New(auth.Config{Modes: []string{auth.ModeTailscale},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, KeyFile: filepath.Join(dir, "cookie.keys"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, local.Namespace, "demo")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(console ConsoleConfig) *rdpEnv {
		srv := httptest.NewServer(New(Config{Desktops: svc, Auth: authn, Sessions: db, Assets: assets, Log: log, Console: console}))
		t.Cleanup(srv.Close)
		return &rdpEnv{srv: srv, db: db, dir: dir}
	}

	direct := serve(ConsoleConfig{})
	if a := direct.connect(t, "alice", d.Ref()); a.Protocol != "vnc" {
		t.Fatalf("connect with the direct path only = %+v; want vnc first (the RDP server is out of reach)", a)
	}
	// The desktop's RDP server answers through the fallback (on a loaded
	// machine it may still be starting): what is tested is that /connect
	// then offers it first.
	var dialErr error
	if !eventually(10*time.Second, func() bool {
		c, err := backendPath{backend}.Dial(ctx, d.Ref(), vdi.ProtocolRDP)
		if dialErr = err; err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("the desktop's RDP server does not answer through the fallback: %v", dialErr)
	}
	e := serve(ConsoleConfig{Paths: []console.Path{backendPath{backend}}})
	begin := time.Now()
	a := e.connect(t, "alice", d.Ref())
	if a.Protocol != "rdp" || a.Token == "" {
		t.Fatalf("connect with a fallback path = %+v; want rdp first", a)
	}
	t.Logf("connect with an RDP probe through the fallback in %s", time.Since(begin).Round(time.Millisecond))
	ws, resp := e.handshake(t, "alice", d.Ref(), a.Token, a.Destination)
	if resp.Error != nil || len(resp.ServerCertChain) == 0 {
		t.Fatalf("RDCleanPath reply = %+v; want the server's certificate, reached through the fallback", resp)
	}
	ws.Close()
	var got []store.Session
	if !eventually(5*time.Second, func() bool {
		got, _ = db.Sessions(ctx, 10)
		return len(got) == 1 && !got[0].ClosedAt.IsZero()
	}) || got[0].Protocol != "rdp" || got[0].Path != console.PathAPIServer {
		t.Errorf("sessions = %+v; want one closed rdp session by path %s", got, console.PathAPIServer)
	}
}
