package snapshot_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"image"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testrfb"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
)

// TestViewer_FollowsResize: an agent's viewer of a real desktop goes on
// when another client (the holder's console fitting its window) changes
// the desktop's size: it takes the new size and a new picture of it,
// where it ended with the desktop, "sent no picture" to the agent.
func TestViewer_FollowsResize(t *testing.T) {
	d := startDesktop(t, "view")
	conn, err := net.Dial("unix", d.VNCSocket())
	if err != nil {
		t.Fatal(err)
	}
	v, err := snapshot.Watch(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gen, err := v.WaitChange(ctx, 0)
	if err != nil {
		t.Fatalf("the first picture: %v", err)
	}

	// Another client asks for 800x600, as a console does for its window.
	other, err := net.Dial("unix", d.VNCSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	id := screenID(t, other)
	if _, err := other.Write(testrfb.SetDesktopSize(800, 600, [5]int{id, 0, 0, 800, 600})); err != nil {
		t.Fatal(err)
	}
	for {
		gen, err = v.WaitChange(ctx, gen)
		if err != nil {
			t.Fatalf("after the desktop went to 800x600 the viewer: %v (size %v); want it to follow", err, size(v))
		}
		if img, _ := v.Frame(); img.Bounds().Size() == image.Pt(800, 600) {
			break
		}
	}
	if w, h := v.Size(); w != 800 || h != 600 {
		t.Errorf("viewer's size %dx%d; want 800x600", w, h)
	}
}

func size(v *snapshot.Viewer) image.Point {
	w, h := v.Size()
	return image.Pt(w, h)
}

// screenID shakes hands on c as an RFB 3.8 client (security None,
// shared) and reads the desktop's screen id from its ExtendedDesktopSize,
// as a console does before it asks for a size.
func screenID(t *testing.T, c net.Conn) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	r := bufio.NewReader(c)
	step := func(what string, err error) {
		if err != nil {
			t.Fatalf("the other client, %s: %v", what, err)
		}
	}
	_, err := io.ReadFull(r, make([]byte, 12))
	step("version", err)
	_, err = c.Write([]byte("RFB 003.008\n"))
	step("version", err)
	n, err := r.ReadByte()
	step("security types", err)
	_, err = io.ReadFull(r, make([]byte, n))
	step("security types", err)
	_, err = c.Write([]byte{1})
	step("security None", err)
	_, err = io.ReadFull(r, make([]byte, 4))
	step("security result", err)
	_, err = c.Write([]byte{1})
	step("shared", err)
	init := make([]byte, 24)
	_, err = io.ReadFull(r, init)
	step("server init", err)
	_, err = io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(init[20:])))
	step("name", err)
	bpp := int(init[4]) / 8
	w, h := binary.BigEndian.Uint16(init[0:]), binary.BigEndian.Uint16(init[2:])
	// ExtendedDesktopSize (-308), then the whole screen.
	_, err = c.Write([]byte{2, 0, 0, 1, 0xff, 0xff, 0xfe, 0xcc, 3, 0, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)})
	step("encodings", err)
	for {
		var hdr [4]byte
		_, err = io.ReadFull(r, hdr[:])
		step("an update", err)
		if hdr[0] != 0 {
			t.Fatalf("the other client: server message %d; want an update", hdr[0])
		}
		for range binary.BigEndian.Uint16(hdr[2:]) {
			var rect [12]byte
			_, err = io.ReadFull(r, rect[:])
			step("a rectangle", err)
			rw, rh, enc := binary.BigEndian.Uint16(rect[4:]), binary.BigEndian.Uint16(rect[6:]), int32(binary.BigEndian.Uint32(rect[8:]))
			switch enc {
			case 0:
				_, err = r.Discard(int(rw) * int(rh) * bpp)
				step("raw pixels", err)
			case -308:
				var layout [4]byte
				_, err = io.ReadFull(r, layout[:])
				step("the layout", err)
				screens := make([]byte, 16*int(layout[0]))
				_, err = io.ReadFull(r, screens)
				step("the screens", err)
				if layout[0] == 0 {
					t.Fatal("the other client: a layout of no screens")
				}
				return int(binary.BigEndian.Uint32(screens))
			default:
				t.Fatalf("the other client: encoding %d it did not ask for", enc)
			}
		}
	}
}

// TestViewer_RefusesHugeResize: a hostile desktop's DesktopSize of
// 8192×8192 ends the viewer, saying so, with no 256 MiB picture.
func TestViewer_RefusesHugeResize(t *testing.T) {
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		server.Write([]byte("RFB 003.008\n"))
		io.ReadFull(server, make([]byte, 12))
		server.Write([]byte{1, 1}) // one security type: None
		io.ReadFull(server, make([]byte, 1))
		server.Write([]byte{0, 0, 0, 0}) // security OK
		io.ReadFull(server, make([]byte, 1))
		init := make([]byte, 24)
		binary.BigEndian.PutUint16(init[0:], 64)
		binary.BigEndian.PutUint16(init[2:], 48)
		server.Write(init)
		io.ReadFull(server, make([]byte, 20+12+10)) // pixel format, encodings, request
		update := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0x20, 0, 0x20, 0, 0xff, 0xff, 0xff, 0x21}
		server.Write(update)
		io.Copy(io.Discard, server)
	}()
	v, err := snapshot.Watch(client)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	select {
	case <-v.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the viewer took an 8192x8192 resize; want it refused")
	}
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "implausible") {
		t.Errorf("viewer ended with %v; want the 8192x8192 screen refused as implausible", err)
	}
	if w, h := v.Size(); w != 64 || h != 48 {
		t.Errorf("viewer's size %dx%d; want it kept at 64x48", w, h)
	}
}
