package relay

// The clipboard filter keeps the latest clipboard when the desktop or the
// client floods it, whatever order their messages come in.

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// quietConn serves a server stream, then times out reads that have a
// deadline (a quiet desktop) until timeouts are spent, then ends.
type quietConn struct {
	fakeConn
	deadline bool
	timeouts int
}

func (c *quietConn) SetReadDeadline(t time.Time) error { c.deadline = !t.IsZero(); return nil }

func (c *quietConn) Read(p []byte) (int, error) {
	n, err := c.fakeConn.Read(p)
	if err == io.EOF && c.deadline && c.timeouts > 0 {
		c.timeouts--
		return 0, os.ErrDeadlineExceeded
	}
	return n, err
}

func TestFilterRFBClipboard_LatestAfterAFlood(t *testing.T) {
	flood := new(rfbServer).handshake()
	for range 100 {
		flood.extended(extNotify|1, 0)
	}
	now := time.Unix(1e9, 0)
	conn := &quietConn{fakeConn: fakeConn{r: bytes.NewReader(flood.Bytes()), chunk: 4096}, timeouts: 3}
	f := FilterRFBClipboard(conn, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, Now: func() time.Time { return now }})
	f.(*rfbFilter).noDeadline = false // quietConn times out as a Unix socket does
	f.Write(new(rfbClient).handshake(1).Bytes())
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		now = now.Add(time.Second) // the flood is over; tokens refill
	}
	want := new(rfbServer).handshake()
	for range cutTextBurst + 1 { // the burst, then one for the latest
		want.extended(extNotify|1, 0)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("got %d bytes; want the handshake, %d notifies and one more for the latest (%d bytes)", len(got), cutTextBurst, len(want.Bytes()))
	}
}

// TestFilterRFBClipboard_ServerAheadOfTheClient: a server that offers one
// security type sends SecurityResult and ServerInit before the client has
// chosen (the portal's screen hub does, to save the browser two round
// trips); the filter follows it, having only the client's version.
func TestFilterRFBClipboard_ServerAheadOfTheClient(t *testing.T) {
	server := new(rfbServer).handshake().cutText("hi").Bytes()
	conn := &fakeConn{r: bytes.NewReader(server), chunk: 5}
	f := FilterRFBClipboard(conn, RFBClipboardConfig{ToDesktop: true, FromDesktop: true})
	defer f.Close()
	client := new(rfbClient).handshake(1).Bytes()
	if _, err := f.Write(client[:12]); err != nil { // the version only
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("the server's handshake ahead of the client's choice: %v", err)
	}
	if !bytes.Equal(got, server) {
		t.Errorf("to the client\n%q; want the server's stream as it is:\n%q", got, server)
	}
	if _, err := f.Write(client[12:]); err != nil {
		t.Fatalf("the client's choice and ClientInit after: %v", err)
	}
}

// TestFilterRFBClipboard_LatestAfterAFloodOnAPipe: on the screen hub's
// net.Pipe, a desktop that floods its clipboard and then goes quiet
// still gets its latest clipboard announced to the client. It used to be
// announced only when more bytes came; an idle console's repaints (noVNC
// asking for its size every 100 ms) were what brought them.
func TestFilterRFBClipboard_LatestAfterAFloodOnAPipe(t *testing.T) {
	flood := new(rfbServer).handshake()
	for range 100 {
		flood.extended(extNotify|1, 0)
	}
	desktop, hub := net.Pipe()
	defer desktop.Close()
	f := FilterRFBClipboard(hub, RFBClipboardConfig{ToDesktop: true, FromDesktop: true})
	defer f.Close()
	go func() {
		io.Copy(io.Discard, desktop)
	}()
	go desktop.Write(flood.Bytes()) // then nothing: a quiet desktop
	f.Write(new(rfbClient).handshake(1).Bytes())
	want := new(rfbServer).handshake()
	for range cutTextBurst + 1 { // the burst, then one for the latest
		want.extended(extNotify|1, 0)
	}
	got := make([]byte, len(want.Bytes()))
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(f, got)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("got %d bytes (%v); want the handshake, %d notifies and one more for the latest", len(got), err, cutTextBurst)
		}
	case <-time.After(10 * time.Second):
		f.Close()
		t.Fatal("after a flood and quiet, the client was not told of the desktop's latest clipboard")
	}
}

// scriptedReader returns one step's bytes a Read, running the step's
// before first (to move a clock or let the client speak).
type scriptedReader []struct {
	before func()
	data   []byte
}

func (r *scriptedReader) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	step := &(*r)[0]
	if step.before != nil {
		step.before()
		step.before = nil
	}
	n := copy(p, step.data)
	if step.data = step.data[n:]; len(step.data) == 0 {
		*r = (*r)[1:]
	}
	return n, nil
}

// TestFilterRFBClipboard_LatestAfterAnOldProvide: a desktop's provide can
// carry the clipboard it had when the client asked (Xvnc fetches an X
// selection from its owner while newer owners announce themselves); a
// notify dropped in the flood after the client asked must still be
// announced. The e2e flood ended with the panel on flood-118 of 120 when
// such a provide cleared it.
func TestFilterRFBClipboard_LatestAfterAnOldProvide(t *testing.T) {
	now := time.Unix(1e9, 0)
	var f net.Conn
	burst := new(rfbServer).handshake()
	for range cutTextBurst + 1 { // the last is dropped
		burst.extended(extNotify|1, 0)
	}
	request := []byte{rfbClientCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(request[8:], extRequest|1)
	script := scriptedReader{
		{data: burst.Bytes()},
		{before: func() { f.Write(request) }, data: new(rfbServer).extended(extNotify|1, 0).Bytes()},
		{before: func() { now = now.Add(time.Second) }, data: new(rfbServer).extended(extProvide|1, 8).Bytes()},
	}
	conn := &quietConn{fakeConn: fakeConn{r: &script, chunk: 1 << 16}, timeouts: 3}
	f = FilterRFBClipboard(conn, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, Now: func() time.Time { return now }})
	f.(*rfbFilter).noDeadline = false
	f.Write(new(rfbClient).handshake(1).Bytes())
	got, _ := io.ReadAll(f)
	want := new(rfbServer).handshake()
	for range cutTextBurst {
		want.extended(extNotify|1, 0)
	}
	want.extended(extProvide|1, 8).extended(extNotify|1, 0)
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("got %d bytes; want the handshake, %d notifies, the old provide and a notify of the latest (%d bytes)", len(got), cutTextBurst, len(want.Bytes()))
	}
}
