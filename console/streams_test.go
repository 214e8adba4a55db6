package console_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestStreams_SharedAcrossReplicas: the holder's serial console opened on
// a is joined by an invitee on b over a stream link: the invitee sees what
// the desktop writes; a view invitee's keys never reach the desktop, a
// control invitee's do; with the holder's console closed, an invitee
// finds none.
func TestStreams_SharedAcrossReplicas(t *testing.T) {
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-4"}
	ctx := context.Background()
	if _, _, ok, err := b.shared.Join(ctx, ref, vdi.ProtocolSerial, false); ok || err != nil {
		t.Fatalf("an invitee's join with no console open: ok=%v, %v; want none, no error", ok, err)
	}
	desk, up := net.Pipe() // the desktop's serial line
	holder, _, err := a.shared.Open(ctx, ref, vdi.ProtocolSerial, dialed(up, "apiserver"), true)
	if err != nil {
		t.Fatal(err)
	}
	viewer, path, ok, err := b.shared.Join(ctx, ref, vdi.ProtocolSerial, false)
	if !ok || err != nil || path != console.PathPeer {
		t.Fatalf("a view invitee on b: ok=%v %q, %v; want the holder's console by %q", ok, path, err, console.PathPeer)
	}
	defer viewer.Close()
	helper, _, ok, err := b.shared.Join(ctx, ref, vdi.ProtocolSerial, true)
	if !ok || err != nil {
		t.Fatalf("a control invitee on b: ok=%v, %v", ok, err)
	}
	defer helper.Close()
	go desk.Write([]byte("login: "))
	if got := readFor(t, viewer, "login: "); !strings.Contains(got, "login: ") {
		t.Errorf("the view invitee on b read %q; want the desktop's %q", got, "login: ")
	}
	viewer.Write([]byte("view-keys\r"))
	helper.Write([]byte("control-keys\r"))
	if got := readFor(t, desk, "control-keys"); strings.Contains(got, "view-keys") || !strings.Contains(got, "control-keys") {
		t.Errorf("the desktop read %q; want the control invitee's keys only", got)
	}
	holder.Close()
	desk.Close()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, _, ok, _ := b.shared.Join(ctx, ref, vdi.ProtocolSerial, false); !ok {
			break
		}
		if time.Now().After(end) {
			t.Fatal("an invitee still joins the holder's console after it closed")
		}
	}
}

// readFor reads c until it has want or 5 s pass, and returns what it read.
func readFor(t *testing.T, c net.Conn, want string) string {
	t.Helper()
	var got []byte
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 256)
	for !strings.Contains(string(got), want) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil && err != io.EOF {
			break
		}
		if err == io.EOF {
			break
		}
	}
	return string(got)
}

// TestStreams_HolderResizesTheTerminal: the holder's terminal, recorded
// cluster-wide, still takes the holder's window size (the record's wrapper
// once hid the pty's Resize, and the shell stayed 80×24); an invitee's
// window never resizes it.
func TestStreams_HolderResizesTheTerminal(t *testing.T) {
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a := startReplica(t, table, "a", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "ct-1"}
	desk, pipe := net.Pipe()
	defer desk.Close()
	pty := &sizedConn{Conn: pipe}
	holder, _, err := a.shared.Open(context.Background(), ref, vdi.ProtocolTerminal, dialed(pty, "direct"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	invitee, _, ok, err := a.shared.Join(context.Background(), ref, vdi.ProtocolTerminal, true)
	if !ok || err != nil {
		t.Fatalf("an invitee's join: ok=%v, %v", ok, err)
	}
	defer invitee.Close()
	resize := func(c net.Conn, cols, rows uint16) {
		rz, ok := c.(interface{ Resize(cols, rows uint16) error })
		if !ok {
			t.Fatalf("%T takes no resize", c)
		}
		if err := rz.Resize(cols, rows); err != nil {
			t.Fatal(err)
		}
	}
	resize(holder, 140, 47)
	resize(invitee, 60, 20)
	if got := pty.size(); got != [2]uint16{140, 47} {
		t.Errorf("the pty's size is %v; want the holder's 140×47", got)
	}
}

// sizedConn is a pty stand-in that keeps the last size it was given.
type sizedConn struct {
	net.Conn
	mu         sync.Mutex
	cols, rows uint16
}

func (c *sizedConn) Resize(cols, rows uint16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cols, c.rows = cols, rows
	return nil
}

func (c *sizedConn) size() [2]uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [2]uint16{c.cols, c.rows}
}

// TestStreams_HandOffFollowed: a draining replica hands its shared serial
// console off (Streams.HandOff): the holder's console there ends, told
// why (the console moves to another portal server), a's
// record goes and a refuses stream links; the invitees relayed from b,
// without opening anything again, follow the holder's console once it is
// opened on c: they read c's desktop, and only the control invitee's keys
// reach it. An invitee whose holder never comes back ends after the wait.
func TestStreams_HandOffFollowed(t *testing.T) {
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b, c := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil), startReplica(t, table, "c", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-5"}
	key := console.StreamKey(ref, vdi.ProtocolSerial)
	ctx := context.Background()
	holder, _ := serialHolder(t, a, ref)
	viewer, helper := serialInvitee(t, b, ref, false), serialInvitee(t, b, ref, true)

	a.shared.HandOff()
	holder.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ce *websocket.CloseError
	if _, err := io.ReadAll(holder); !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || ce.Text != console.ConsoleMoves {
		t.Fatalf("the holder's console on a after the hand-off: %v; want it ended, saying why: 1012 %q", err, console.ConsoleMoves)
	}
	for end := time.Now().Add(10 * time.Second); table.version(key) != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("a's record of the shared console stays after its hand-off")
		}
	}
	late, _ := net.Pipe()
	if _, _, err := a.shared.Open(ctx, ref, vdi.ProtocolSerial, dialed(late, "apiserver"), true); err == nil {
		t.Error("a draining replica opened a shared console after its hand-off; want it refused")
	}

	deskC, upC := net.Pipe() // the holder's page opens the console again, on c
	defer deskC.Close()
	again, _, err := c.shared.Open(ctx, ref, vdi.ProtocolSerial, dialed(upC, "apiserver"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	go func() {
		for range 50 { // until the invitees have followed
			if _, err := deskC.Write([]byte("login: ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for who, conn := range map[string]net.Conn{"view": viewer, "control": helper} {
		if got := readFor(t, conn, "login: "); !strings.Contains(got, "login: ") {
			t.Errorf("the %s invitee on b read %q after the hand-off; want c's desktop's %q", who, got, "login: ")
		}
	}
	viewer.Write([]byte("view-keys\r"))
	helper.Write([]byte("control-keys\r"))
	if got := readFor(t, deskC, "control-keys"); strings.Contains(got, "view-keys") || !strings.Contains(got, "control-keys") {
		t.Errorf("c's desktop read %q; want the control invitee's keys only", got)
	}
}

// version returns the version of key's record, empty when there is none.
func (t *ownerTable) version(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recs[key].Version
}

// TestStreams_FollowGivesUp: an invitee's link whose holder's console
// ended (the VM stopped) and does not come back ends once the follow's wait has run out, and a
// write waiting for it fails.
func TestStreams_FollowGivesUp(t *testing.T) {
	defer console.SetFollowWait(time.Second)()
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-6"}
	desk, up := net.Pipe()
	defer desk.Close()
	holder, _, err := a.shared.Open(context.Background(), ref, vdi.ProtocolSerial, dialed(up, "apiserver"), true)
	if err != nil {
		t.Fatal(err)
	}
	helper, _, ok, err := b.shared.Join(context.Background(), ref, vdi.ProtocolSerial, true)
	if !ok || err != nil {
		t.Fatalf("a control invitee on b: ok=%v, %v", ok, err)
	}
	defer helper.Close()
	holder.Close()
	desk.Close() // the VM stopped
	ended := make(chan error, 2)
	go func() { _, err := io.ReadAll(helper); ended <- err }()
	go func() {
		var err error
		for err == nil { // the link's end shows on a write too, then waits for the follow
			_, err = helper.Write([]byte("x"))
			time.Sleep(50 * time.Millisecond)
		}
		ended <- err
	}()
	for i := range 2 {
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("the invitee's link is still open 30 s after its holder's console closed (%d of 2 ended)", i)
		}
	}
}

// TestStreams_DrainingFollowerSaysSo: an invitee on b followed the
// holder's console to b itself (the holder reopened it there); b drains
// and hands it off: the invitee's console ends saying the console moves,
// as the holder's does, so the page reconnects to another replica, rather
// than following the holder's next console from a replica that is
// shutting down (cut off at the drain's end as "session ended").
func TestStreams_DrainingFollowerSaysSo(t *testing.T) {
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b, c := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil), startReplica(t, table, "c", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-7"}
	ctx := context.Background()
	holder, _ := serialHolder(t, a, ref)
	helper := serialInvitee(t, b, ref, true)
	holder.Close() // the holder's page reloads, and opens the console on b
	_, deskB := serialHolder(t, b, ref)
	go deskB.Write([]byte("on-b "))
	readFor(t, helper, "on-b ") // followed to b

	b.shared.HandOff()
	deskC, upC := net.Pipe() // the holder's page opens it again, on c
	defer deskC.Close()
	if _, _, err := c.shared.Open(ctx, ref, vdi.ProtocolSerial, dialed(upC, "apiserver"), true); err != nil {
		t.Fatal(err)
	}
	go deskC.Write([]byte("on-c "))
	var got []byte
	buf := make([]byte, 256)
	for {
		n, err := helper.Read(buf)
		got = append(got, buf[:n]...)
		if strings.Contains(string(got), "on-c ") {
			t.Fatalf("the invitee's console on b after b's hand-off read %q: it followed the console to c from a draining replica; want it ended, saying why: 1012 %q", got, console.ConsoleMoves)
		}
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || ce.Text != console.ConsoleMoves {
				t.Errorf("the invitee's console on b after b's hand-off: read %q, then %v; want it ended, saying why: 1012 %q", got, err, console.ConsoleMoves)
			}
			return
		}
	}
}

// serialHolder opens the holder's serial console of ref on r (shared) and
// returns its end and the desktop's, both closed when t ends.
func serialHolder(t *testing.T, r *replica, ref vdi.Ref) (holder, desk net.Conn) {
	t.Helper()
	desk, up := net.Pipe()
	t.Cleanup(func() { desk.Close() })
	holder, _, err := r.shared.Open(context.Background(), ref, vdi.ProtocolSerial, dialed(up, "apiserver"), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	return holder, desk
}

// serialInvitee joins an invitee (with control or not) to the holder's
// serial console of ref from r; it is closed when t ends.
func serialInvitee(t *testing.T, r *replica, ref vdi.Ref, control bool) net.Conn {
	t.Helper()
	c, _, ok, err := r.shared.Join(context.Background(), ref, vdi.ProtocolSerial, control)
	if !ok || err != nil {
		t.Fatalf("an invitee (control %v) on the holder's serial console: ok=%v, %v", control, ok, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialed is a dial that returns up, reached by path.
func dialed(up net.Conn, path string) func(context.Context) (net.Conn, string, error) {
	return func(context.Context) (net.Conn, string, error) { return up, path, nil }
}
