package fanout

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// pty is the console's side for the tests: a pipe that records resizes.
type pty struct {
	net.Conn
	mu      sync.Mutex
	resizes [][2]uint16
}

func (p *pty) Resize(cols, rows uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resizes = append(p.resizes, [2]uint16{cols, rows})
	return nil
}

func newConsole(t *testing.T) (*pty, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &pty{Conn: a}, b
}

// readUntil reads from c until what it read contains want.
func readUntil(t *testing.T, c net.Conn, want string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 64<<10)
	for !bytes.Contains(got, []byte(want)) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("read %q, then %v; want %q", got, err, want)
		}
	}
	return string(got)
}

// TestStream_ViewersSeeTheConsole: the owner and a viewer read the same
// output, a viewer who joins later starts with the backlog; only input
// from clients with control reaches the console, and only the owner's
// resize.
func TestStream_ViewersSeeTheConsole(t *testing.T) {
	up, console := newConsole(t)
	var ss Streams
	owner, err := ss.Open("d/terminal", up, "direct", false)
	if err != nil {
		t.Fatal(err)
	}
	viewer, path, ok := ss.Join("d/terminal", false)
	if !ok || path != "direct" {
		t.Fatalf("joined %v, path %q; want the owner's stream, direct", ok, path)
	}
	console.Write([]byte("$ ls\r\nnotes.txt\r\n$ "))
	for _, c := range []net.Conn{owner, viewer} {
		readUntil(t, c, "notes.txt\r\n$ ")
	}
	late, _, _ := ss.Join("d/terminal", false)
	readUntil(t, late, "$ ls\r\nnotes.txt")
	helper, _, _ := ss.Join("d/terminal", true)

	go viewer.Write([]byte("rm -rf ~\r"))
	go late.Write([]byte("reboot\r"))
	time.Sleep(100 * time.Millisecond) // read and dropped by now
	go owner.Write([]byte("pwd\r"))
	readUntil(t, console, "pwd\r")
	go helper.Write([]byte("date\r"))
	got := readUntil(t, console, "date\r")
	if strings.Contains(got, "rm") || strings.Contains(got, "reboot") {
		t.Errorf("the console got a viewer's input: %q", got)
	}
	viewer.Resize(10, 5)
	helper.Resize(11, 6)
	owner.Resize(120, 40)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.resizes) != 1 || up.resizes[0] != [2]uint16{120, 40} {
		t.Errorf("the console was resized %v; want only the owner's 120x40", up.resizes)
	}
}

// TestStream_StalledViewerIsDropped: a viewer that stops reading is
// dropped once far behind; the owner reads every byte meanwhile.
func TestStream_StalledViewerIsDropped(t *testing.T) {
	up, console := newConsole(t)
	var ss Streams
	owner, _ := ss.Open("d/terminal", up, "direct", false)
	stalled, _, _ := ss.Join("d/terminal", false)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	total := 2*maxBehind + len(chunk) // past what its writer holds and its queue
	go func() {
		for n := 0; n < total; n += len(chunk) {
			console.Write(chunk)
		}
	}()
	owner.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := io.CopyN(io.Discard, owner, int64(total)); err != nil {
		t.Fatalf("the owner read %d of %d bytes: %v", n, total, err)
	}
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, stalled)
	if err != nil || n >= int64(total) {
		t.Errorf("the stalled viewer read %d bytes, then %v; want its queue, then its console closed", n, err)
	}
}

// TestStreams_Lifetime: the last client leaving ends the stream (and its
// console); an exclusive Open (a serial line) ends the one it replaces,
// another leaves it to its clients.
func TestStreams_Lifetime(t *testing.T) {
	var ss Streams
	up1, console1 := newConsole(t)
	o1, _ := ss.Open("d/terminal", up1, "direct", false)
	v1, _, _ := ss.Join("d/terminal", false)
	up2, _ := newConsole(t)
	o2, _ := ss.Open("d/terminal", up2, "direct", false)
	console1.Write([]byte("still here"))
	readUntil(t, v1, "still here")
	o1.Close()
	v1.Close()
	console1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := console1.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the first console after its last client left: %v; want it closed", err)
	}
	up3, console3 := newConsole(t)
	o3, _ := ss.Open("d/terminal", up3, "direct", true)
	o2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := o2.Read(make([]byte, 1)); err == nil {
		t.Error("an exclusive Open left the stream it replaced open")
	}
	o3.Close()
	console3.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := console3.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the last console after its owner left: %v; want it closed", err)
	}
	if _, _, ok := ss.Join("d/terminal", false); ok {
		t.Error("joined a console that has ended")
	}
}

// TestStreams_OwnerLeaves: when the holder's console that opened a
// stream closes, the stream ends with its clients: an invitee never keeps
// a shell (or a serial line) the holder has closed, typing into it
// unseen, nor holds it open beside the console the holder opens next.
func TestStreams_OwnerLeaves(t *testing.T) {
	var ss Streams
	up, console := newConsole(t)
	owner, _ := ss.Open("d/terminal", up, "direct", false)
	invitee, _, ok := ss.Join("d/terminal", true)
	if !ok {
		t.Fatal("the invitee did not join the holder's console")
	}
	owner.Close()
	invitee.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, invitee); err != nil {
		t.Errorf("the invitee's console after the holder's closed: %v; want it ended", err)
	}
	console.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := console.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the console after the holder's closed, an invitee with control still on it: %v; want it closed", err)
	}
	if _, _, ok := ss.Join("d/terminal", false); ok {
		t.Error("joined a console whose holder closed it")
	}
}

// TestStreams_CloseAll: a draining replica's CloseAll ends every console,
// the newest of a key and the older one a non-exclusive Open kept, with
// their clients, whose ends read the reason given.
func TestStreams_CloseAll(t *testing.T) {
	var ss Streams
	up1, console1 := newConsole(t)
	o1, _ := ss.Open("d/terminal", up1, "direct", false)
	up2, console2 := newConsole(t)
	o2, _ := ss.Open("d/terminal", up2, "direct", false)
	v2, _, _ := ss.Join("d/terminal", true)
	moves := errors.New("the console moves")
	ss.CloseAll(moves)
	for name, c := range map[string]net.Conn{"the older console": console1, "the newest console": console2, "its owner's end": o1, "the newer owner's end": o2, "its client": v2} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s after CloseAll: %v; want it closed", name, err)
		}
		if _, client := c.(*Conn); client && !errors.Is(err, moves) {
			t.Errorf("%s after CloseAll: %v; want the reason given (%v)", name, err, moves)
		}
	}
	if _, _, ok := ss.Join("d/terminal", false); ok {
		t.Error("joined a console after CloseAll")
	}
}
