package kube_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
)

// TestScreenOwners: the screen owner records on a real apiserver, as the
// portal's ServiceAccount. The first writer wins; a stale record cannot be
// written over nor released (compare-and-swap on resourceVersion); an
// owner is alive while its heartbeat is renewed, dead once it runs out
// (a replica killed: its network cut) or is deleted (a replica that
// stopped), and then its screens may be taken over. The replicas' clocks
// need not agree: readers whose clocks run 3 minutes ahead and behind
// see a live owner alive and a killed one dead as one with the right
// time does.
func TestScreenOwners(t *testing.T) {
	ns, client := ownersSetup(t)
	var cut atomic.Bool // replica a's network
	cs, csA := client(nil), client(&cut)
	ctx := context.Background()
	mk := func(id string, cs kubernetes.Interface, skew time.Duration) *kube.ScreenOwners {
		now := func() time.Time { return time.Now().Add(skew) } // keeps the monotonic reading
		o := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: cs, Namespace: ns, Identity: id, Now: now, Log: slog.New(slog.DiscardHandler)})
		o.SetURL("http://" + id + ":8080")
		return o
	}
	a, b := mk("replica-a", csA, 0), mk("replica-b", cs, 0)
	ahead, behind := mk("replica-ahead", cs, 3*time.Minute), mk("replica-behind", cs, -3*time.Minute)
	key := "team/vm-1"

	if o, err := a.Get(ctx, key); err != nil || o.Version != "" {
		t.Fatalf("Get before any owner = %+v, %v; want no record", o, err)
	}
	ownA, err := a.Take(ctx, key, console.Owner{})
	if err != nil || ownA.Replica != "replica-a" {
		t.Fatalf("a takes the free screen: %+v, %v", ownA, err)
	}
	if _, err := b.Take(ctx, key, console.Owner{}); !errors.Is(err, console.ErrOwnerChanged) {
		t.Errorf("b creates a record a has: %v; want ErrOwnerChanged", err)
	}

	// a's heartbeat: alive while renewed.
	hctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(hctx) }()
	waitAlive := func(r *kube.ScreenOwners, want bool) console.Owner {
		t.Helper()
		var o console.Owner
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if o, err = r.Get(ctx, key); err == nil && o.Alive == want {
				return o
			}
		}
		t.Fatalf("the owner as %s reads it: %+v, %v; want alive=%v", r.Self(), o, err, want)
		return o
	}
	seen := waitAlive(b, true)
	if seen.Replica != "replica-a" || seen.URL != "http://replica-a:8080" || seen.Version != ownA.Version {
		t.Errorf("b reads %+v; want a's record with its URL", seen)
	}
	if _, err := b.Take(ctx, key, seen); err != nil {
		// Screens never takes a live owner's record; the store itself
		// only compares versions, so this write is allowed.
		t.Fatalf("b writes over the record it read: %v", err)
	}
	if _, err := a.Take(ctx, key, ownA); !errors.Is(err, console.ErrOwnerChanged) {
		t.Errorf("a writes over a record it no longer has: %v; want ErrOwnerChanged", err)
	}
	if err := a.Release(ctx, key, ownA); err != nil {
		t.Errorf("a releases a stale record: %v; want nothing done, no error", err)
	}
	ownB := waitAlive(b, true)
	if ownB.Replica != "replica-b" {
		t.Fatalf("after a's stale release the record names %q; want replica-b", ownB.Replica)
	}
	if err := b.Release(ctx, key, ownB); err != nil {
		t.Fatal(err)
	}
	if o, _ := b.Get(ctx, key); o.Version != "" {
		t.Errorf("after b's release: %+v; want no record", o)
	}

	// a owns again, alive to readers whose clocks are minutes off (one
	// ahead would take its screen, judging its renewTime).
	if ownA, err = a.Take(ctx, key, console.Owner{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*kube.ScreenOwners{b, ahead, behind} {
		waitAlive(r, true)
	}

	// The live replicas, whose claims split a pool's members
	// (vdi.Replicas): those whose heartbeats ran and did not drain at a
	// replica's last look, and none once that look is 5 s old.
	var later atomic.Int64 // f's clock, ahead by
	f := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: cs, Namespace: ns, Identity: "replica-f", Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.Now().Add(time.Duration(later.Load())) }})
	fctx, stopF := context.WithCancel(ctx)
	fDone := make(chan struct{})
	go func() { defer close(fDone); f.Run(fctx) }()
	waitLive := func(r *kube.ScreenOwners, want ...string) {
		t.Helper()
		var live []string
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if _, live = r.Live(); slices.Equal(live, want) {
				return
			}
		}
		t.Fatalf("%s sees %v live; want %v", r.Self(), live, want)
	}
	waitLive(f, "replica-a", "replica-f")
	waitLive(a, "replica-a", "replica-f")
	stopF()
	<-fDone
	waitLive(a, "replica-a") // f's heartbeat deleted as it stopped
	later.Store(int64(5 * time.Second))
	if self, live := f.Live(); self != "replica-f" || live != nil {
		t.Errorf("f's Live 5 s after its last look = %s, %v; want replica-f and none known", self, live)
	}

	// Peers are found by their heartbeats while they run and do not drain.
	if got := mk("replica-d", cs, 0).Peers(ctx); !slices.Equal(got, []string{"http://replica-a:8080"}) {
		t.Errorf("peers found = %v; want a's URL (b runs no heartbeat)", got)
	}
	a.SetDraining()
	if _, live := a.Live(); len(live) != 0 {
		t.Errorf("a sees %v live once it drains; want itself left out at once", live)
	}
	var got []string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got = mk("replica-e", cs, 0).Peers(ctx); len(got) == 0 {
			break
		}
	}
	if len(got) != 0 {
		t.Errorf("peers found while a drains = %v; want none", got)
	}
	waitAlive(ahead, true) // still, renewals later

	// a is killed (its network cut: its heartbeat stays, not renewed):
	// dead to every reader once it has run out, also to one whose clock
	// is behind (judging its renewTime, it would wait minutes).
	cut.Store(true)
	stop()
	<-done
	for _, r := range []*kube.ScreenOwners{behind, ahead, b} {
		waitAlive(r, false)
	}
	ownB, err = b.Take(ctx, key, ownA)
	if err != nil {
		t.Fatalf("b takes over a killed replica's screen: %v", err)
	}

	// a comes back and owns again; when it stops, its heartbeat is
	// deleted: dead to every reader.
	cut.Store(false)
	if err := b.Release(ctx, key, ownB); err != nil {
		t.Fatal(err)
	}
	if ownA, err = a.Take(ctx, key, console.Owner{}); err != nil {
		t.Fatal(err)
	}
	hctx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); a.Run(hctx) }()
	waitAlive(behind, true)
	stop()
	<-done
	waitAlive(behind, false)
	if _, err := b.Take(ctx, key, ownA); err != nil {
		t.Errorf("b takes over a stopped replica's screen: %v", err)
	}
}

// ownersSetup returns a fresh namespace on the package's cluster, with
// deploy/rbac.yaml applied, and client(cut), a client as the portal's
// ServiceAccount whose requests fail while cut is set (nil: never).
func ownersSetup(t *testing.T) (string, func(cut *atomic.Bool) kubernetes.Interface) {
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	sa := c.PortalServiceAccount(t)
	return c.Namespace(t), func(cut *atomic.Bool) kubernetes.Interface {
		cfg := rest.CopyConfig(sa)
		if cut != nil {
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutTransport{rt, cut} })
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
}

// cutTransport fails every request while cut is set: a replica cut off
// the network, or killed, as the apiserver sees it.
type cutTransport struct {
	http.RoundTripper
	cut *atomic.Bool
}

func (c cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("network cut")
	}
	return c.RoundTripper.RoundTrip(r)
}

// TestScreenOwners_PortClosed: a replica killed outright leaves its port
// closed, and the others take it as dead as soon as it has missed two
// renewals, not when its heartbeat (here a minute) runs out. One cut off
// the API server whose port still answers is not: its heartbeat decides.
func TestScreenOwners_PortClosed(t *testing.T) {
	ns, client := ownersSetup(t)
	ctx := context.Background()
	b := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: client(nil), Namespace: ns, Identity: "replica-b", Log: slog.New(slog.DiscardHandler)})
	// owner starts replica id owning key, listening on ln, with a
	// minute's heartbeat, and returns how to kill it: its network to the
	// API server cut (its heartbeat stays, unrenewed) and its Run ended.
	owner := func(id, key string, ln net.Listener) (kill func()) {
		var cut atomic.Bool
		a := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: client(&cut), Namespace: ns, Identity: id, Heartbeat: time.Minute, Log: slog.New(slog.DiscardHandler)})
		a.SetURL("http://" + ln.Addr().String())
		if _, err := a.Take(ctx, key, console.Owner{}); err != nil {
			t.Fatal(err)
		}
		hctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); a.Run(hctx) }()
		t.Cleanup(func() { stop(); <-done })
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if o, err := b.Get(ctx, key); err == nil && o.Alive {
				break
			} else if time.Now().After(end) {
				t.Fatalf("b reads %s's screen: %+v, %v; want alive", id, o, err)
			}
		}
		return func() { cut.Store(true); stop(); <-done }
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}

	// Killed: its port closed with it.
	ln := listen()
	kill := owner("replica-a", "team/vm-1", ln)
	kill()
	ln.Close()
	killed := time.Now()
	for end := killed.Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		o, err := b.Get(ctx, "team/vm-1")
		if err == nil && !o.Alive {
			t.Logf("a killed, its port closed: dead to b after %v (its heartbeat lives a minute)", time.Since(killed).Round(time.Millisecond))
			if _, err := b.Take(ctx, "team/vm-1", o); err != nil {
				t.Errorf("b takes over a killed replica's screen: %v", err)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("b reads a's screen 30 s after a was killed with its port: %+v, %v; want dead, long before its heartbeat of a minute runs out", o, err)
		}
	}

	// Cut off the API server, its port still open: alive until its
	// heartbeat runs out, whatever the dial says.
	kill = owner("replica-c", "team/vm-2", listen())
	kill()
	time.Sleep(probeAfterForTest + 2*time.Second)
	if o, err := b.Get(ctx, "team/vm-2"); err != nil || !o.Alive {
		t.Errorf("b reads c's screen, c cut off the API server but its port open: %+v, %v; want alive (its heartbeat decides)", o, err)
	}
}

// probeAfterForTest is kube's probeAfter: two missed renewals of a second.
const probeAfterForTest = 2 * time.Second
