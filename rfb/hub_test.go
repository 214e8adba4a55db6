package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
)

// startXvnc starts a real local desktop and returns a dialer of its VNC
// socket that counts the connections it opened.
func startXvnc(t testing.TB, geometry string) (Dialer, *atomic.Int32, string) {
	t.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "crfb") // short: the VNC socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, err := local.StartDesktop(context.Background(), local.DesktopSpec{Name: "rfb", Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home"), Geometry: geometry}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	var dials atomic.Int32
	sock := d.VNCSocket()
	dial := func(ctx context.Context) (net.Conn, string, error) {
		dials.Add(1)
		var nd net.Dialer
		c, err := nd.DialContext(ctx, "unix", sock)
		return c, "direct", err
	}
	return dial, &dials, sock
}

// TestHub_RealXvnc_OneUpstreamManyClients: three clients (two ZRLE, one
// Raw through snapshot's own RFB client) share one connection to a real
// Xvnc and see the same screen the desktop shows a direct client, pixel
// for pixel; the hub closes its connection after the last leaves.
func TestHub_RealXvnc_OneUpstreamManyClients(t *testing.T) {
	dial, dials, sock := startXvnc(t, "640x400")
	var hubs Hubs
	ctx := context.Background()
	join := func(control bool) net.Conn {
		c, path, err := hubs.Join(ctx, "ns/rfb", control, dial)
		if err != nil {
			t.Fatal(err)
		}
		if path != "direct" {
			t.Errorf("path %q; want the dialer's", path)
		}
		return c
	}
	a := dialTestClient(t, join(true), encZRLE, encExtendedDesktopSize)
	b := dialTestClient(t, join(false), encZRLE, encDesktopSize)
	rawConn := join(false)
	defer rawConn.Close()

	var want *image.RGBA
	var same bool
	for range 20 { // the desktop paints as it starts: retry until still
		direct, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		want, err = snapshot.Take(direct, 0, time.Now().Add(10*time.Second))
		direct.Close()
		must(t, err)
		for _, c := range []*testClient{a, b} {
			c.request(false)
			must(t, c.next())
		}
		same = bytes.Equal(rgbx(want), a.fb.pix) && bytes.Equal(a.fb.pix, b.fb.pix)
		if same && want.RGBAAt(2, 2).R == 0x2f {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !same {
		t.Errorf("the hub's clients' screens differ from a direct client's")
	}
	raw, err := snapshot.Take(rawConn, 0, time.Now().Add(10*time.Second))
	must(t, err)
	if got := raw.Bounds().Size(); got != image.Pt(640, 400) {
		t.Errorf("the raw client's screen is %v; want 640x400", got)
	}
	if got := raw.RGBAAt(2, 2); got != want.RGBAAt(2, 2) {
		t.Errorf("the raw client's corner %v; want %v", got, want.RGBAAt(2, 2))
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the desktop was dialed %d times for three clients; want 1", n)
	}
	hub, ok := hubs.Hub("ns/rfb")
	if !ok {
		t.Fatal("no hub while clients are connected")
	}
	a.conn.Close()
	b.conn.Close()
	rawConn.Close()
	select {
	case <-hub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hub still runs after its last client left")
	}
	if _, ok := hubs.Hub("ns/rfb"); ok {
		t.Error("Hubs still lists the hub after its last client left")
	}
	c := dialTestClient(t, join(false), encZRLE)
	defer c.conn.Close()
	if n := dials.Load(); n != 2 {
		t.Errorf("a client after the hub closed made %d dials in all; want 2", n)
	}
}

// rgbx returns img's pixels in the canonical format.
func rgbx(img *image.RGBA) []byte {
	b := append([]byte(nil), img.Pix...)
	for i := 3; i < len(b); i += 4 {
		b[i] = 0
	}
	return b
}

// TestHub_RealXvnc_Resize: a client with control resizes the real desktop;
// it gets the answer to its own request (reason 1), another client gets
// the new size as another client's change (reason 2), both without asking
// for an update, and a client without control cannot resize it.
func TestHub_RealXvnc_Resize(t *testing.T) {
	dial, _, _ := startXvnc(t, "640x400")
	var hubs Hubs
	join := func(control bool) *testClient {
		c, _, err := hubs.Join(context.Background(), "ns/rfb", control, dial)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return dialTestClient(t, c, encZRLE, encExtendedDesktopSize)
	}
	holder, other, viewer := join(true), join(true), join(false)
	for _, c := range []*testClient{holder, other, viewer} {
		c.request(false)
		must(t, c.next()) // the layout (reason 0) and the screen
		if c.reason != 0 {
			t.Fatalf("first update's ExtendedDesktopSize reason %d; want 0", c.reason)
		}
		if c.rects[encZRLE] == 0 {
			t.Error("the first update has the layout but no pixels; want both in one")
		}
	}
	setSize := func(c *testClient, w, h int) {
		msg := []byte{msgSetDesktopSize, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h), 1, 0,
			0, 0, 0, 0, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h), 0, 0, 0, 0}
		c.conn.Write(msg)
	}
	setSize(viewer, 320, 200)
	setSize(holder, 800, 600)
	// The size change comes unasked, as TigerVNC sends it: noVNC asks for
	// nothing more until its SetDesktopSize is answered.
	// Xvnc may tell of the change (reason 0) before it answers: the
	// answer comes all the same.
	waitSize := func(c *testClient, reason int) {
		t.Helper()
		for must(t, c.next()); c.fb.w != 800 || c.reason != reason; must(t, c.next()) {
		}
		if c.reason != reason || c.status != 0 || c.fb.h != 600 {
			t.Errorf("after the resize: reason %d status %d size %dx%d; want reason %d status 0 800x600", c.reason, c.status, c.fb.w, c.fb.h, reason)
		}
	}
	waitSize(holder, 1)
	waitSize(other, 2)
	waitSize(viewer, 2)
}

// TestHub_DesktopEnds: when the desktop's connection ends, every client's
// connection ends too, and the next Join connects again.
func TestHub_DesktopEnds(t *testing.T) {
	var desktops []net.Conn
	dial := func(context.Context) (net.Conn, string, error) {
		d := newScriptedDesktop(t, 64, 32)
		desktops = append(desktops, d.conn)
		return d.peer, "direct", nil
	}
	var hubs Hubs
	c1, _, err := hubs.Join(context.Background(), "k", true, dial)
	must(t, err)
	a := dialTestClient(t, c1, encZRLE)
	desktops[0].Close()
	a.request(false)
	for {
		if err := a.next(); err != nil {
			break
		}
		a.request(true)
	}
	c2, _, err := hubs.Join(context.Background(), "k", true, dial)
	must(t, err)
	defer c2.Close()
	dialTestClient(t, c2, encZRLE)
	if len(desktops) != 2 {
		t.Errorf("%d dials; want a new one after the desktop's connection ended", len(desktops))
	}
}

// TestHub_FirstScreenIsPainted: a desktop that sends its pointer's shape
// in an update of its own before the screen (Xvnc did, as the kube tests'
// VM display) still gives the first client its screen, not the black of
// an unpainted hub (CI: the dashboard's thumbnail of a VM came out black).
func TestHub_FirstScreenIsPainted(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	d.fill = [3]byte{200, 100, 50}
	d.cursorFirst = &cursorShape{w: 1, h: 1, pix: []byte{1, 2, 3, 0}, mask: []byte{0x80}}
	d.paintDelay = 300 * time.Millisecond // a client joining meanwhile gets what the hub has
	serve := connectScripted(t, d)
	c := dialTestClient(t, serve(false), encZRLE)
	c.request(false)
	must(t, c.next())
	if got := c.pixel(0, 0); got != d.fill {
		t.Errorf("the first client's first screen has %v at 0,0; want the desktop's %v", got, d.fill)
	}
}

// TestHub_ResizeBeforeSetEncodings: a client that has shaken hands but
// not yet said which encodings it follows when the desktop changes size
// is told the new size once it asks, not dropped (CI: an invitee's
// console closed 0.2 s after it opened while the holder's window resized
// the desktop).
func TestHub_ResizeBeforeSetEncodings(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	holder := dialTestClient(t, serve(true), encZRLE, encExtendedDesktopSize)
	holder.request(false)
	must(t, holder.next())

	// The newcomer's handshake, up to ServerInit, and nothing more yet.
	late := serve(true)
	late.SetDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, 64)
	must(t, readFull(late, b[:12]))
	late.Write([]byte("RFB 003.008\n"))
	must(t, readFull(late, b[:2]))
	late.Write([]byte{1})
	must(t, readFull(late, b[:4]))
	late.Write([]byte{1})
	must(t, readFull(late, b[:24+4])) // ServerInit and the name "test"

	must(t, d.grow(128, 64, [3]byte{10, 20, 30}))
	for must(t, holder.next()); holder.fb.w != 128; must(t, holder.next()) {
	} // the hub has told every client of the change by now
	time.Sleep(50 * time.Millisecond) // the newcomer's writer has woken on it

	msg := append([]byte{msgSetPixelFormat, 0, 0, 0}, canonical.marshal()...)
	msg = append(msg, msgSetEncodings, 0, 0, 2)
	for _, e := range []int32{encZRLE, encExtendedDesktopSize} {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	_, err := late.Write(append(msg, updateRequest(false, 64, 32)...))
	must(t, err)
	c := &testClient{t: t, conn: late, reason: -1, rects: map[int32]int{}}
	c.fb.resize(64, 32)
	for must(t, c.next()); c.fb.w != 128; must(t, c.next()) {
		c.request(false)
	}
	if c.fb.h != 64 {
		t.Errorf("the newcomer sees a %dx%d screen; want 128x64", c.fb.w, c.fb.h)
	}
}

// TestHub_GuestModeAfterAPassedOnAnswer: QEMU answers a console's
// SetDesktopSize at once with status 4 (passed to the guest), and the
// guest sets its mode a moment later. When both come before the hub's
// writer has sent the answer (a loaded CI run: a VM's second head stayed
// at QEMU's 640x480 in the console for good), the client is told the new
// size after the answer, which it takes no size from (noVNC, as this test
// client), not only the answer.
func TestHub_GuestModeAfterAPassedOnAnswer(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	c := dialTestClient(t, serve(true), encRaw, encExtendedDesktopSize)
	c.request(false)
	must(t, c.next()) // the layout and the screen
	// The writer sends a new frame and waits there: the client reads
	// nothing until the desktop has answered and changed.
	c.request(true)
	must(t, d.frame([3]byte{200, 0, 0}))
	time.Sleep(50 * time.Millisecond)
	c.conn.Write(setDesktopSize(128, 64))
	select {
	case <-d.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the SetDesktopSize did not reach the desktop")
	}
	must(t, d.answer(4))
	must(t, d.grow(128, 64, [3]byte{10, 20, 30}))
	c.rects = map[int32]int{}
	for n := 0; c.fb.w != 128 && n < 3; n++ { // the frame, then the answer and the change
		must(t, c.next())
		c.request(true)
	}
	if c.fb.w != 128 || c.fb.h != 64 || c.rects[encExtendedDesktopSize] != 2 {
		t.Errorf("the client sees %dx%d after %d ExtendedDesktopSize rectangles (the last reason %d, status %d); want 128x64 after the answer and the change",
			c.fb.w, c.fb.h, c.rects[encExtendedDesktopSize], c.reason, c.status)
	}
}

// TestHub_SecondSetEncodingsWithoutResizes: a client whose first
// SetEncodings follows size changes (the one the relay sends for a
// watcher) and whose own, a moment later, asks for Raw only gets Raw
// rectangles only (the soak's watchers were sent ExtendedDesktopSize).
func TestHub_SecondSetEncodingsWithoutResizes(t *testing.T) {
	serve := connectScripted(t, newScriptedDesktop(t, 64, 32))
	b := serve(false)
	c := dialTestClient(t, b, encDesktopSize, encExtendedDesktopSize)
	time.Sleep(50 * time.Millisecond) // the writer has woken on it
	_, err := b.Write([]byte{msgSetEncodings, 0, 0, 1, 0, 0, 0, 0})
	must(t, err)
	c.request(false)
	must(t, c.next())
	for enc, n := range c.rects {
		if enc != encRaw {
			t.Errorf("%d rectangles of encoding %d; want Raw only", n, enc)
		}
	}
	if c.rects[encRaw] == 0 {
		t.Error("no Raw rectangle: the screen was not sent")
	}
}

// connectScripted connects a hub to d, closed when the test ends, and
// returns a function that serves it one more client.
func connectScripted(t *testing.T, d *scriptedDesktop) func(control bool) net.Conn {
	t.Helper()
	hub, err := Connect(d.peer)
	must(t, err)
	t.Cleanup(func() { hub.Close() })
	return func(control bool) net.Conn {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, control)
		t.Cleanup(func() { b.Close() })
		return b
	}
}
