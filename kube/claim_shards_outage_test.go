package kube_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimsByShard_HolderLosesTheAPIServer: r0 forwards alice's claim to
// r1, which holds her shard, and the API server goes away from r1 while
// it writes her member's Lease: the write is made, but its answer never
// comes. She is told the API server does not answer and to try again;
// r1's watch is behind when it is back (it lost its connection too), and
// her next claim, forwarded again, gets the desktop the lost answer was
// for: where r1 read her Leases from its cache after her last write it
// knew of (its takeover), missed the one whose answer was lost and gave
// her a second desktop.
func TestClaimsByShard_HolderLosesTheAPIServer(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	gate := newWatchGate("/leases")
	defer gate.release()
	away := &goneAway{holder: "alice"}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(away.wrap)
	kube.ReportUnreachable(cfg)
	v := newView("r1") // r1 holds every shard; r0 forwards
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 4, 4), 0)
	r0 := f.start("r0", mustLeases(t, c.Config), v)
	f.start("r1", mustLeases(t, cfg), v)
	waitShards(t, c, ns, "r1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := vdi.Identity{Login: "alice"}

	gate.hold() // r1's watch is behind from here
	away.arm()
	_, err := r0.Claim(ctx, alice, ns, "p")
	var e *vdi.Error
	if !errors.As(err, &e) || e.Code != vdi.EUnavailable || !strings.Contains(e.Msg, "API server") || !strings.Contains(e.Hint, "Try again") {
		t.Fatalf("alice's claim, its Lease written as the API server went away from the holder: %v; want EUnavailable saying the API server does not answer and to try again", err)
	}
	written := heldIn(t, c, ns, "p", "alice")
	if len(written) != 1 {
		t.Fatalf("alice holds %v after the lost answer; want the one desktop it was for", written)
	}
	away.back()

	d, err := r0.Claim(ctx, alice, ns, "p")
	gate.release()
	if err != nil {
		t.Fatalf("alice's claim once the API server is back: %v; want her desktop", err)
	}
	if hers := heldIn(t, c, ns, "p", "alice"); d.Name != written[0] || len(hers) != 1 {
		t.Errorf("alice's claim once the API server is back got %s, and she holds %v; want %s, the one the lost answer was for, alone", d.Name, hers, written[0])
	}
}

// goneAway is a rest.Config WrapTransport for a replica whose API server
// goes away once armed: the create of holder's member Lease reaches it,
// its answer is lost (the connection reset), and every request after it
// is refused until back.
type goneAway struct {
	holder string

	mu    sync.Mutex
	armed bool
	gone  bool
}

func (g *goneAway) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *goneAway) back() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.gone = false, false
}

func (g *goneAway) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		g.mu.Lock()
		armed, gone := g.armed, g.gone
		g.mu.Unlock()
		switch {
		case gone:
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		case armed && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/leases"):
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			if !bytes.Contains(body, []byte(g.holder)) || bytes.Contains(body, []byte("claimshard-")) {
				break // not her member's Lease
			}
			res, err := rt.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			res.Body.Close()
			g.mu.Lock()
			g.gone = true
			g.mu.Unlock()
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
		return rt.RoundTrip(req)
	})
}
