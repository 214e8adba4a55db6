package rfb

import (
	"bytes"
	"context"
	"net"
	"testing"
)

// TestHub_Cursor: the desktop's pointer shape reaches, exact, every client
// that follows the Cursor pseudo-encoding (noVNC draws it locally): one
// waiting for an update gets a new shape at once, one that joins later
// gets the current shape, and one that does not follow it never gets it.
func TestHub_Cursor(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	hub, err := Connect(d.peer)
	must(t, err)
	defer hub.Close()
	serve := func(encs ...int32) *testClient {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, false)
		t.Cleanup(func() { b.Close() })
		c := dialTestClient(t, b, encs...)
		c.request(false)
		must(t, c.next())
		return c
	}
	early, plain := serve(encZRLE, encCursor), serve(encZRLE)
	shape := func(hx, hy, w, h int, seed byte) *cursorShape {
		cur := &cursorShape{x: hx, y: hy, w: w, h: h}
		for i := range w * h {
			cur.pix = append(cur.pix, seed+byte(i), byte(i*3), 255-byte(i), 0)
		}
		for i := range (w + 7) / 8 * h {
			cur.mask = append(cur.mask, seed^byte(i*7))
		}
		return cur
	}
	same := func(a, b *cursorShape) bool {
		return a != nil && b != nil && a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h && bytes.Equal(a.pix, b.pix) && bytes.Equal(a.mask, b.mask)
	}
	for _, want := range []*cursorShape{shape(3, 4, 17, 9, 1), shape(0, 0, 24, 24, 2)} {
		early.request(true) // waiting: the shape is the update
		must(t, d.setCursor(want))
		must(t, early.next())
		if !same(early.cursor, want) {
			t.Fatalf("the client following Cursor got %+v; want %+v", early.cursor, want)
		}
	}
	late := serve(encZRLE, encCursor)
	if !same(late.cursor, shape(0, 0, 24, 24, 2)) {
		t.Errorf("a client joining later got cursor %+v; want the current one", late.cursor)
	}
	must(t, d.frame([3]byte{9, 9, 9}))
	for plain.pixel(0, 0) != [3]byte{9, 9, 9} {
		plain.request(true)
		must(t, plain.next())
	}
	if plain.cursor != nil || plain.rects[encCursor] != 0 {
		t.Errorf("a client not following Cursor got %d cursor rectangles", plain.rects[encCursor])
	}
}
