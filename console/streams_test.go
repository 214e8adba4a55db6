package console_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

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
	holder, err := a.shared.Open(ctx, ref, vdi.ProtocolSerial, up, "apiserver", true)
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
	holder, err := a.shared.Open(context.Background(), ref, vdi.ProtocolTerminal, pty, "direct", false)
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
