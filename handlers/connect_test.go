package handlers

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

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
	ctx := context.Background()
	st := mustRDPStack(t, "cfb", 1, func(b *local.Backend) vdi.Backend { return unreachableRDP{b} })
	backend, db := st.backend, st.db
	ref := st.claim(t, "alice")
	serve := func(console ConsoleConfig) *rdpEnv {
		srv := httptest.NewServer(New(Config{Desktops: st.svc, Auth: st.authn, Sessions: db, Assets: st.assets, Log: st.log, Console: console}))
		t.Cleanup(srv.Close)
		return &rdpEnv{srv: srv, db: db, dir: st.dir}
	}

	direct := serve(ConsoleConfig{})
	if a := direct.connect(t, "alice", ref); a.Protocol != "vnc" {
		t.Fatalf("connect with the direct path only = %+v; want vnc first (the RDP server is out of reach)", a)
	}
	// The desktop's RDP server answers through the fallback (on a loaded
	// machine it may still be starting): what is tested is that /connect
	// then offers it first.
	var dialErr error
	if !eventually(10*time.Second, func() bool {
		c, err := backendPath{backend}.Dial(ctx, ref, vdi.ProtocolRDP)
		if dialErr = err; err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("the desktop's RDP server does not answer through the fallback: %v", dialErr)
	}
	e := serve(ConsoleConfig{Paths: []console.Path{backendPath{backend}}})
	begin := time.Now()
	a := e.connect(t, "alice", ref)
	if a.Protocol != "rdp" || a.Token == "" {
		t.Fatalf("connect with a fallback path = %+v; want rdp first", a)
	}
	t.Logf("connect with an RDP probe through the fallback in %s", time.Since(begin).Round(time.Millisecond))
	ws, resp := e.handshake(t, "alice", ref, a.Token, a.Destination)
	if resp.Error != nil || len(resp.ServerCertChain) == 0 {
		t.Fatalf("RDCleanPath reply = %+v; want the server's certificate, reached through the fallback", resp)
	}
	ws.Close()
	var got []vdi.Session
	if !eventually(5*time.Second, func() bool {
		got, _ = db.Sessions(ctx, 10)
		return len(got) == 1 && !got[0].ClosedAt.IsZero()
	}) || got[0].Protocol != "rdp" || got[0].Path != console.PathAPIServer {
		t.Errorf("sessions = %+v; want one closed rdp session by path %s", got, console.PathAPIServer)
	}
}
