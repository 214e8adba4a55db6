package kube_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// link is a TCP path to the API server that a test can cut (new
// connections refused, open ones reset) and mend, as a network would.
type link struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newLink(t *testing.T, target string) *link {
	t.Helper()
	l := &link{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.addr = ln.Addr().String()
	l.serve(ln)
	t.Cleanup(l.cut)
	return l
}

func (l *link) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", l.target)
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns[c], l.conns[up] = true, true
			l.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection through it.
func (l *link) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ln.Close()
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// mend listens again on the same address.
func (l *link) mend(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	l.serve(ln)
}

// TestAPIServerGoesAway cuts the portal's way to the API server in the
// middle of use: claims and releases fail with an error that says the API
// server does not answer and what to do, nothing held is lost, and once the
// network is back everything works as before.
func TestAPIServerGoesAway(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns := s.ctx, s.ns
	testcluster.StoppedVM(t, s.admin, ns, "golden", nil)

	// The portal's clients go through net, which the test cuts and mends;
	// s.vms would go straight to the API server.
	host, err := url.Parse(s.sa.Host)
	if err != nil {
		t.Fatal(err)
	}
	net := newLink(t, host.Host)
	cfg := rest.CopyConfig(s.sa)
	cfg.Host = "https://" + net.addr
	cfg.Timeout = 5 * time.Second
	kube.ReportUnreachable(cfg)
	vms, err := kube.NewVMs(kube.Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(vms, mustLeases(t, cfg))
	root := vdi.Identity{Login: "root", Admin: true}
	if err := svc.CreatePool(ctx, root, vdi.Pool{Namespace: ns, Name: "desk", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "golden", Size: 2}); err != nil {
		t.Fatal(err)
	}
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	a, err := svc.Claim(ctx, alice, ns, "desk")
	if err != nil {
		t.Fatal(err)
	}

	net.cut()
	unreachable := func(what string, err error) {
		t.Helper()
		var e *vdi.Error
		if !errors.As(err, &e) || e.Code != vdi.EUnavailable || !strings.Contains(e.Msg, "API server") || !strings.Contains(e.Hint, "Try again") {
			t.Errorf("%s with the API server out of reach: %v; want EUnavailable saying the API server does not answer", what, err)
		}
	}
	_, err = svc.Claim(ctx, bob, ns, "desk")
	unreachable("bob's claim", err)
	unreachable("alice's release", svc.Release(ctx, alice, a.Ref(), ""))
	_, err = svc.Desktop(ctx, alice, a.Ref())
	unreachable("alice's desktop", err)

	net.mend(t)
	var d vdi.Desktop
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if d, err = svc.Desktop(ctx, alice, a.Ref()); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || d.Holder != "alice" {
		t.Fatalf("alice's desktop after the API server is back: %+v, %v; want still hers", d, err)
	}
	b, err := svc.Claim(ctx, bob, ns, "desk")
	if err != nil || b.Name == a.Name {
		t.Fatalf("bob's claim after the API server is back: %+v, %v; want the other member", b, err)
	}
	if err := svc.Release(ctx, alice, a.Ref(), ""); err != nil {
		t.Fatalf("alice's release after the API server is back: %v", err)
	}
}
