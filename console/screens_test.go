package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/fanout"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ownerTable is the owner records replicas share (a Lease per desktop on
// Kubernetes), with which replicas are alive.
type ownerTable struct {
	mu   sync.Mutex
	seq  int
	recs map[string]console.Owner
	dead map[string]bool
}

// tableOwners is one replica's view of an ownerTable.
type tableOwners struct {
	t         *ownerTable
	self, url string
}

func (o tableOwners) Self() string { return o.self }

func (o tableOwners) Get(_ context.Context, key string) (console.Owner, error) {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	r := o.t.recs[key]
	r.Alive = r.Version != "" && !o.t.dead[r.Replica]
	return r, nil
}

func (o tableOwners) Take(_ context.Context, key string, prev console.Owner) (console.Owner, error) {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if o.t.recs[key].Version != prev.Version {
		return console.Owner{}, console.ErrOwnerChanged
	}
	o.t.seq++
	r := console.Owner{Replica: o.self, URL: o.url, Version: strconv.Itoa(o.t.seq), Alive: true}
	o.t.recs[key] = r
	return r, nil
}

func (o tableOwners) Release(_ context.Context, key string, r console.Owner) error {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if o.t.recs[key].Version == r.Version {
		delete(o.t.recs, key)
	}
	return nil
}

// replica is one portal's screens and shared consoles, serving screen
// and stream links as the handlers do (handlers.handlePeerScreen,
// handlePeerStream).
type replica struct {
	screens *console.Screens
	shared  *console.Streams
	srv     *httptest.Server

	mu     sync.Mutex
	videos []*websocket.Conn // its ends of the video links it served
	busy   atomic.Int32      // how many video links to answer 503 first, as a replica draining does
	log    logLines          // what its Screens logged
}

// logLines keeps the lines of a text log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// with returns the lines holding s.
func (l *logLines) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			got = append(got, line)
		}
	}
	return got
}

// breakVideoLinks cuts the video links r serves, as a network between the
// replicas that drops them does: no close frame.
func (r *replica) breakVideoLinks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.videos {
		ws.Close()
	}
	r.videos = nil
}

const testSecret = "a-peer-secret-of-thirty-two-byte"

func startReplica(t testing.TB, table *ownerTable, name string, dial rfb.Dialer) *replica {
	return startReplicaHubs(t, table, name, dial, new(rfb.Hubs))
}

// startReplicaHubs is startReplica with its hubs, and serving video links
// as handlers.handlePeerVideo does.
func startReplicaHubs(t testing.TB, table *ownerTable, name string, dial rfb.Dialer, hubs *rfb.Hubs) *replica {
	r := &replica{}
	verify := relay.NewPeerVerifier([]byte(testSecret))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /peer/v1/screen/{role}/{ns}/{member}", func(w http.ResponseWriter, req *http.Request) {
		ref := vdi.Ref{Namespace: req.PathValue("ns"), Name: req.PathValue("member")}
		role := req.PathValue("role")
		nonce, err := verify.Check(req.Header.Get(relay.PeerAuthHeader), time.Now(), req.Host, relay.ScreenLink(role), ref.Namespace, ref.Name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		conn, err := r.screens.ServeLink(req.Context(), ref, role == relay.ScreenControl, nonce, dial)
		if errors.Is(err, console.ErrNotOwner) {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		pipeLink(w, req, conn)
	})
	mux.HandleFunc("GET /peer/v1/stream/{protocol}/{role}/{ns}/{member}", func(w http.ResponseWriter, req *http.Request) {
		ref := vdi.Ref{Namespace: req.PathValue("ns"), Name: req.PathValue("member")}
		proto, role := req.PathValue("protocol"), req.PathValue("role")
		if _, err := verify.Check(req.Header.Get(relay.PeerAuthHeader), time.Now(), req.Host, relay.StreamLink(proto, role), ref.Namespace, ref.Name); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		conn, err := r.shared.ServeLink(ref, vdi.Protocol(proto), role == relay.ScreenControl)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		pipeLink(w, req, conn)
	})
	mux.HandleFunc("GET /peer/v1/held/{protocol}/{version}/{ns}/{member}", func(w http.ResponseWriter, req *http.Request) {
		ref := vdi.Ref{Namespace: req.PathValue("ns"), Name: req.PathValue("member")}
		proto, version := req.PathValue("protocol"), req.PathValue("version")
		if _, err := verify.Check(req.Header.Get(relay.PeerAuthHeader), time.Now(), req.Host, relay.HeldKind(proto, version), ref.Namespace, ref.Name); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(relay.Held{Held: r.shared.Holds(ref, vdi.Protocol(proto), version)})
	})
	mux.HandleFunc("GET /peer/v1/video/{nonce}/{ns}/{member}", func(w http.ResponseWriter, req *http.Request) {
		ref := vdi.Ref{Namespace: req.PathValue("ns"), Name: req.PathValue("member")}
		nonce := req.PathValue("nonce")
		if r.busy.Add(-1) >= 0 {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		if _, err := verify.Check(req.Header.Get(relay.PeerAuthHeader), time.Now(), req.Host, relay.VideoLink(nonce), ref.Namespace, ref.Name); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		err := r.screens.ServeVideo(req.Context(), ref, nonce, func() (*relay.VideoConn, error) {
			ws, err := relay.Upgrader(func(*http.Request) bool { return true }).Upgrade(w, req, nil)
			if err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.videos = append(r.videos, ws)
			r.mu.Unlock()
			return relay.NewVideoConn(ws), nil
		})
		if errors.Is(err, console.ErrNoScreenLink) {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	owners := tableOwners{t: table, self: name, url: r.srv.URL}
	r.screens = console.NewScreens(console.ScreensConfig{Hubs: hubs, PeerSecret: []byte(testSecret), Wait: 3 * time.Second,
		Owners: owners, Log: slog.New(slog.NewTextHandler(&r.log, nil))})
	r.shared = console.NewStreams(new(fanout.Streams), owners, []byte(testSecret), slog.New(slog.DiscardHandler))
	return r
}

// pipeLink upgrades a link's request and relays it to conn.
func pipeLink(w http.ResponseWriter, req *http.Request, conn net.Conn) {
	ws, err := relay.Upgrader(func(*http.Request) bool { return true }).Upgrade(w, req, nil)
	if err != nil {
		conn.Close()
		return
	}
	relay.Pipe(req.Context(), ws, conn, relay.Options{MaxMessage: relay.DefaultMaxMessage})
}

// startDesktop starts a real desktop and returns a dialer of its VNC
// socket that counts the connections it opened.
func startDesktop(t testing.TB) (rfb.Dialer, *atomic.Int32) {
	t.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "cscr") // short: the VNC socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, err := local.StartDesktop(context.Background(), local.DesktopSpec{Name: "scr", Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home"), Geometry: "320x200"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	waitDrawn(t, d.VNCSocket())
	var dials atomic.Int32
	return func(ctx context.Context) (net.Conn, string, error) {
		dials.Add(1)
		var nd net.Dialer
		c, err := nd.DialContext(ctx, "unix", d.VNCSocket())
		return c, "direct", err
	}, &dials
}

// waitDrawn waits until the desktop's session has drawn itself: openbox
// starts the terminal after Xvnc is ready, so the screen changes for a
// while after StartDesktop returns, and pictures taken by two clients one
// after the other would differ for that alone. It waits for three
// pictures in a row, 300 ms apart, to be the same.
func waitDrawn(t testing.TB, socket string) {
	t.Helper()
	var last []byte
	same := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		img, err := snapshot.Take(c, 0, time.Now().Add(10*time.Second))
		c.Close()
		if err != nil {
			t.Fatalf("the desktop's screen: %v", err)
		}
		if bytes.Equal(img.Pix, last) {
			if same++; same == 2 {
				return
			}
		} else {
			same = 0
		}
		last = img.Pix
	}
	t.Fatal("the desktop's screen kept changing for 30 s")
}

// picture takes the screen a client connection shows.
func picture(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	img, err := snapshot.Take(conn, 0, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("the client's screen: %v", err)
	}
	return img.Pix
}

// TestScreens_OneUpstreamAcrossReplicas: clients of one desktop on two
// replicas share one upstream (the first replica's, which owns the
// screen; the other relays over a signed screen link) and see the same
// pixels; a replica the record does not name refuses a link and dials
// nothing; when the owner dies, the next client takes the screen over by
// compare-and-swap and dials the desktop once more.
func TestScreens_OneUpstreamAcrossReplicas(t *testing.T) {
	dial, dials := startDesktop(t)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", dial), startReplica(t, table, "b", dial)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	ctx := context.Background()

	onA, path, err := a.screens.Join(ctx, ref, true, dial)
	if err != nil || path != "direct" {
		t.Fatalf("the first client, on a: %v by %q; want the desktop, direct", err, path)
	}
	defer onA.Close()
	onB, path, err := b.screens.Join(ctx, ref, false, dial)
	if err != nil || path != console.PathPeer {
		t.Fatalf("a client on b: %v by %q; want the owner's hub by %q", err, path, console.PathPeer)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d upstream connections for clients on two replicas; want 1", n)
	}
	if pa, pb := picture(t, onA), picture(t, onB); !bytes.Equal(pa, pb) {
		t.Error("the clients on a and b see different screens; want the one desktop's")
	}
	onB.Close()

	// A link to b, which does not own the screen: refused, nothing dialed.
	if _, err := relay.DialPeerScreen(ctx, b.srv.URL, []byte(testSecret), relay.ScreenControl, ref.Namespace, ref.Name); !isStatus(err, http.StatusConflict) {
		t.Errorf("a screen link to a replica that does not own the screen: %v; want 409", err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d upstream connections after a link to a non-owner; want still 1", n)
	}

	// a dies: its server and upstream go, its heartbeat runs out.
	a.srv.CloseClientConnections()
	a.srv.Close()
	onA.Close()
	table.mu.Lock()
	table.dead["a"] = true
	table.mu.Unlock()
	again, path, err := b.screens.Join(ctx, ref, true, dial)
	if err != nil || path != "direct" {
		t.Fatalf("a client on b after a died: %v by %q; want b to own the screen (direct)", err, path)
	}
	defer again.Close()
	if n := dials.Load(); n != 2 {
		t.Errorf("%d upstream connections; want 2 (a's, then b's)", n)
	}
	if o, _ := (tableOwners{t: table}).Get(ctx, ref.String()); o.Replica != "b" {
		t.Errorf("the owner record names %q; want b", o.Replica)
	}
	picture(t, again)
}

// TestScreens_RecheckAfterAHeartbeatLapse: while a's heartbeat had run
// out, b took the screen (its dial would get 503 from a KubeVirt VMI, not
// kick a); a's Recheck closes a's hub, so that its clients reconnect to b.
func TestScreens_RecheckAfterAHeartbeatLapse(t *testing.T) {
	dial, _ := startDesktop(t)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", dial), startReplica(t, table, "b", dial)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-3"}
	ctx := context.Background()
	onA, _, err := a.screens.Join(ctx, ref, true, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer onA.Close()
	picture(t, onA)
	a.screens.Recheck(ctx)
	if err := onA.SetReadDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := onA.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a's client after a Recheck with a's record intact: %v; want it open", err)
	}
	table.mu.Lock()
	table.dead["a"] = true
	table.mu.Unlock()
	prev, _ := tableOwners{t: table, self: "b"}.Get(ctx, ref.String())
	if _, err := (tableOwners{t: table, self: "b", url: b.srv.URL}).Take(ctx, ref.String(), prev); err != nil {
		t.Fatal(err)
	}
	a.screens.Recheck(ctx)
	onA.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, onA); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a's client after another replica took the screen and a rechecked: still open; want closed")
	}
}

// TestScreens_RaceOneOwner: clients arriving at once on three replicas
// make one owner and one upstream.
func TestScreens_RaceOneOwner(t *testing.T) {
	dial, dials := startDesktop(t)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	var reps []*replica
	for _, n := range []string{"a", "b", "c"} {
		reps = append(reps, startReplica(t, table, n, dial))
	}
	ref := vdi.Ref{Namespace: "ns", Name: "vm-2"}
	var wg sync.WaitGroup
	conns := make([]net.Conn, 6)
	errs := make([]error, 6)
	for i := range conns {
		wg.Go(func() { conns[i], _, errs[i] = reps[i%3].screens.Join(context.Background(), ref, i == 0, dial) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer conns[i].Close()
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d upstream connections for six clients racing on three replicas; want 1", n)
	}
	first := picture(t, conns[0])
	for i, c := range conns[1:] {
		if !bytes.Equal(picture(t, c), first) {
			t.Errorf("client %d sees another screen than client 0", i+1)
		}
	}
}

// isStatus reports whether err is a peer's refusal with status code.
func isStatus(err error, code int) bool {
	var no *relay.PeerRefusal
	return errors.As(err, &no) && no.Status == code
}

// TestScreens_HandOff: a draining owner hands its screens off as the
// drain begins: its hub closes, its record goes, and a client of another
// replica joining again makes that replica the owner (direct) while the
// draining one still runs; a link to the draining one is refused after.
// Its own client and the one relayed through b are told why (the screen
// moves to another portal server), not that the desktop closed.
func TestScreens_HandOff(t *testing.T) {
	dial, dials := startDesktop(t)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", dial), startReplica(t, table, "b", dial)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-4"}
	ctx := context.Background()
	onA, _, err := a.screens.Join(ctx, ref, true, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer onA.Close()
	onB, path, err := b.screens.Join(ctx, ref, false, dial)
	if err != nil || path != console.PathPeer {
		t.Fatalf("a client on b: %v by %q; want a's hub by %q", err, path, console.PathPeer)
	}
	defer onB.Close()
	picture(t, onB)

	a.screens.HandOff()
	for who, c := range map[string]net.Conn{"a's own client": onA, "b's client, relayed to a": onB} {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s still open after a handed its screens off; want it closed, to reconnect", who)
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || ce.Text != console.ScreenMoves {
			t.Errorf("%s ended with %v after a handed its screens off; want 1012 %q", who, err, console.ScreenMoves)
		}
	}
	again, path, err := b.screens.Join(ctx, ref, false, dial)
	if err != nil || path != "direct" {
		t.Fatalf("b's client joining again: %v by %q; want b to own the screen now (direct)", err, path)
	}
	defer again.Close()
	picture(t, again)
	if o, _ := (tableOwners{t: table}).Get(ctx, ref.String()); o.Replica != "b" {
		t.Errorf("the owner record names %q; want b", o.Replica)
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("%d upstream connections; want 2 (a's, then b's)", n)
	}
	if _, err := relay.DialPeerScreen(ctx, a.srv.URL, []byte(testSecret), relay.ScreenView, ref.Namespace, ref.Name); !isStatus(err, http.StatusConflict) {
		t.Errorf("a screen link to the draining replica: %v; want 409", err)
	}
}
