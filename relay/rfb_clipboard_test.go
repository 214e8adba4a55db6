package relay

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// rfbServer builds a server-to-client RFB stream.
type rfbServer struct{ bytes.Buffer }

// handshake is version 3.8, security None, SecurityResult OK and a
// ServerInit of 1280x800 at 32 bits per pixel, depth 24.
func (s *rfbServer) handshake() *rfbServer {
	s.WriteString("RFB 003.008\n")
	s.Write([]byte{1, 1})       // one security type: None
	s.Write([]byte{0, 0, 0, 0}) // SecurityResult OK
	s.Write([]byte{5, 0, 3, 32})
	s.Write([]byte{32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0})
	s.Write([]byte{0, 0, 0, 4})
	s.WriteString("desk")
	return s
}

// update is a FramebufferUpdate whose rectangles hold bytes that look
// like ServerCutText messages, in each encoding the filter follows.
func (s *rfbServer) update() *rfbServer {
	rect := func(w, h uint16, enc int32) {
		binary.Write(s, binary.BigEndian, [4]uint16{0, 0, w, h})
		binary.Write(s, binary.BigEndian, enc)
	}
	s.Write([]byte{rfbFramebufferUpdate, 0, 0, 10})
	rect(2, 1, 0) // Raw: 2 pixels of 4 bytes
	s.Write([]byte{3, 0, 0, 0, 3, 0, 0, 0})
	rect(2, 2, 1) // CopyRect
	s.Write([]byte{0, 3, 0, 3})
	rect(4, 4, 16) // ZRLE
	s.Write([]byte{0, 0, 0, 5, 3, 3, 3, 3, 3})
	rect(16, 16, 50) // Open H.264: length, flags, an access unit
	s.Write([]byte{0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 1, 0x65, 3, 3})
	rect(8, 8, 7) // Tight fill
	s.Write([]byte{0x80, 3, 3, 3})
	rect(8, 8, 7) // Tight basic, palette of 2: 8 bytes of bits, raw
	s.Write([]byte{0x40, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
	rect(20, 20, 7) // Tight basic, copy filter: zlib with a 2-byte length
	s.Write([]byte{0x40, 0, 0x81, 0x01})
	s.Write(bytes.Repeat([]byte{3}, 129))
	rect(8, 8, 7) // Tight JPEG
	s.Write([]byte{0x90, 3, 3, 3, 3})
	rect(2, 2, -239) // Cursor: 2x2x4 pixels + 2 bytes of mask
	s.Write(bytes.Repeat([]byte{3}, 18))
	rect(0, 0, -308) // ExtendedDesktopSize, one screen
	s.Write([]byte{1, 0, 0, 0})
	s.Write(make([]byte, 16))
	return s
}

func (s *rfbServer) cutText(text string) *rfbServer {
	s.Write([]byte{rfbServerCutText, 0, 0, 0})
	binary.Write(s, binary.BigEndian, uint32(len(text)))
	s.WriteString(text)
	return s
}

// extended is a cut text in the Extended Clipboard format with flags and
// n more payload bytes.
func (s *rfbServer) extended(flags uint32, n int) *rfbServer {
	s.Write([]byte{rfbServerCutText, 0, 0, 0})
	binary.Write(s, binary.BigEndian, int32(-(4 + n)))
	binary.Write(s, binary.BigEndian, flags)
	s.Write(bytes.Repeat([]byte{'z'}, n))
	return s
}

func (s *rfbServer) bell() *rfbServer { s.WriteByte(rfbBell); return s }

// fakeConn is a desktop: Read serves a server stream in chunks, Write
// keeps what the filter let through to it.
type fakeConn struct {
	net.Conn
	r     io.Reader
	chunk int
	w     bytes.Buffer
}

func (c *fakeConn) Read(p []byte) (int, error)  { return c.r.Read(p[:min(len(p), c.chunk)]) }
func (c *fakeConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *fakeConn) Close() error                { return nil }

// filterBoth runs client and server streams through a filter with cfg in
// chunks of size and returns what reached the desktop and the client.
func filterBoth(t *testing.T, cfg RFBClipboardConfig, client, server []byte, size int) (toDesktop, toClient []byte, err error) {
	t.Helper()
	conn := &fakeConn{r: bytes.NewReader(server), chunk: size}
	f := FilterRFBClipboard(conn, cfg)
	// The client speaks first after each server step; feeding the whole
	// client stream first is the same to a filter that records shared
	// state before the server needs it.
	for p := client; len(p) > 0; {
		n := min(size, len(p))
		if _, err := f.Write(p[:n]); err != nil {
			return conn.w.Bytes(), nil, err
		}
		p = p[n:]
	}
	out, err := io.ReadAll(f)
	f.Close()
	return conn.w.Bytes(), out, err
}

// drops collects OnDrop reports.
type drops struct {
	mu   sync.Mutex
	list []ClipboardDrop
}

func (d *drops) add(c ClipboardDrop) { d.mu.Lock(); d.list = append(d.list, c); d.mu.Unlock() }

func (d *drops) count(dir, reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.list {
		if c.Direction == dir && c.Reason == reason {
			n += c.Count
		}
	}
	return n
}

func TestFilterRFBClipboard_Policy(t *testing.T) {
	chatter := new(rfbClient).handshake(1).pixelFormat32().updateRequest().key().pointer()
	client := append(chatter.Bytes(), new(rfbClient).cutText("secret to desktop").updateRequest().Bytes()...)
	withoutCut := append(chatter.Bytes(), new(rfbClient).updateRequest().Bytes()...)
	server := new(rfbServer).handshake().update().cutText("secret from desktop").bell().update().Bytes()
	serverWithout := new(rfbServer).handshake().update().bell().update().Bytes()
	for _, tc := range []struct {
		name             string
		to, from         bool
		wantDesk, wantCl []byte
	}{
		{"both", true, true, client, server},
		{"to-desktop", true, false, client, serverWithout},
		{"from-desktop", false, true, withoutCut, server},
		{"off", false, false, withoutCut, serverWithout},
	} {
		for _, size := range []int{1, 5, 4096} {
			var d drops
			desk, cl, err := filterBoth(t, RFBClipboardConfig{ToDesktop: tc.to, FromDesktop: tc.from, OnDrop: d.add}, client, server, size)
			if err != nil {
				t.Fatalf("%s/%d: %v", tc.name, size, err)
			}
			if !bytes.Equal(desk, tc.wantDesk) {
				t.Errorf("%s/%d: to the desktop\n%q; want\n%q", tc.name, size, desk, tc.wantDesk)
			}
			if !bytes.Equal(cl, tc.wantCl) {
				t.Errorf("%s/%d: to the client\n%q; want\n%q", tc.name, size, cl, tc.wantCl)
			}
			if got, want := d.count("to-desktop", "policy"), b2i(!tc.to); got != want {
				t.Errorf("%s/%d: %d to-desktop policy drops reported; want %d", tc.name, size, got, want)
			}
			if got, want := d.count("from-desktop", "policy"), b2i(!tc.from); got != want {
				t.Errorf("%s/%d: %d from-desktop policy drops reported; want %d", tc.name, size, got, want)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pixelFormat32 is noVNC's SetPixelFormat: 32 bits per pixel, depth 24.
func (c *rfbClient) pixelFormat32() *rfbClient {
	c.Write([]byte{rfbSetPixelFormat, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0})
	return c
}

func TestFilterRFBClipboard_Extended(t *testing.T) {
	const caps, request = 1 << 24, 1 << 25
	server := new(rfbServer).handshake().extended(caps|1, 4).extended(extNotify|1, 0).extended(extProvide|1, 10).extended(request|1, 0).bell().Bytes()
	want := new(rfbServer).handshake().extended(caps|1, 4).extended(request|1, 0).bell().Bytes()
	client := new(rfbClient).handshake(1).Bytes()
	var d drops
	_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, OnDrop: d.add}, client, server, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("to the client\n%q; want capabilities and requests only:\n%q", got, want)
	}
	if n := d.count("from-desktop", "policy"); n != 2 {
		t.Errorf("%d policy drops reported; want 2 (notify, provide)", n)
	}
}

func TestFilterRFBClipboard_BadInput(t *testing.T) {
	client := new(rfbClient).handshake(1).Bytes()
	t.Run("huge classic text is cut", func(t *testing.T) {
		huge := strings.Repeat("x", 10<<20)
		server := new(rfbServer).handshake().cutText(huge).bell().Bytes()
		var d drops
		_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, OnDrop: d.add}, client, server, 32<<10)
		if err != nil {
			t.Fatal(err)
		}
		want := new(rfbServer).handshake().cutText(huge[:DefaultMaxCutText]).bell().Bytes()
		if !bytes.Equal(got, want) {
			t.Errorf("got %d bytes; want the text cut to %d bytes and the bell after it (%d bytes)", len(got), DefaultMaxCutText, len(want))
		}
		if d.count("from-desktop", "too large") != 1 {
			t.Errorf("drops %+v; want one too large", d.list)
		}
	})
	t.Run("huge extended text is dropped", func(t *testing.T) {
		server := new(rfbServer).handshake().extended(extProvide|1, 2<<20).bell().Bytes()
		_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true}, client, server, 32<<10)
		if err != nil {
			t.Fatal(err)
		}
		if want := new(rfbServer).handshake().bell().Bytes(); !bytes.Equal(got, want) {
			t.Errorf("got %d bytes; want the handshake and the bell", len(got))
		}
	})
	t.Run("invalid UTF-8 and binary pass as bytes", func(t *testing.T) {
		server := new(rfbServer).handshake().cutText("\xff\xfe\x00bin\xc3").bell().Bytes()
		_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true}, client, server, 7)
		if err != nil || !bytes.Equal(got, server) {
			t.Errorf("got %q, %v; want it unchanged (the page decodes and shows it)", got, err)
		}
	})
	t.Run("extended too short for its flags", func(t *testing.T) {
		server := new(rfbServer).handshake().Bytes()
		server = append(server, rfbServerCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 'a', 'b')
		server = append(server, rfbBell)
		var d drops
		_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, OnDrop: d.add}, client, server, 1)
		if err != nil || !bytes.Equal(got, new(rfbServer).handshake().bell().Bytes()) || d.count("from-desktop", "malformed") != 1 {
			t.Errorf("got %q, %v, drops %+v; want it dropped as malformed", got, err, d.list)
		}
	})
	t.Run("flood", func(t *testing.T) {
		flood := new(rfbServer).handshake()
		for range 1000 {
			flood.cutText("spam")
		}
		flood.bell()
		var d drops
		now := time.Unix(1e9, 0)
		_, got, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, OnDrop: d.add, Now: func() time.Time { return now }}, client, flood.Bytes(), 4096)
		if err != nil {
			t.Fatal(err)
		}
		want := new(rfbServer).handshake()
		for range cutTextBurst {
			want.cutText("spam")
		}
		if !bytes.Equal(got, want.bell().Bytes()) {
			t.Errorf("got %d bytes; want the burst of %d and the bell", len(got), cutTextBurst)
		}
		if n := d.count("from-desktop", "flood"); n != 1000-cutTextBurst {
			t.Errorf("%d flood drops reported; want %d", n, 1000-cutTextBurst)
		}
		if len(d.list) > 2 {
			t.Errorf("%d reports for one instant's flood; want at most two (the first, and the rest at close)", len(d.list))
		}
	})
	t.Run("a client flood of huge texts", func(t *testing.T) {
		c := new(rfbClient).handshake(1)
		for range 50 {
			c.cutText(strings.Repeat("y", 300<<10))
		}
		c.key()
		server := new(rfbServer).handshake().Bytes()
		now := time.Unix(1e9, 0) // one instant: the burst, however slow the machine (or -race)
		desk, _, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true, FromDesktop: true, Now: func() time.Time { return now }}, c.Bytes(), server, 32<<10)
		if err != nil {
			t.Fatal(err)
		}
		if max := cutTextBurst*(DefaultMaxCutText+8) + 1000; len(desk) > max || !bytes.HasSuffix(desk, new(rfbClient).key().Bytes()) {
			t.Errorf("%d bytes reached the desktop; want at most %d, ending with the key event", len(desk), max)
		}
	})
}

func TestFilterRFBClipboard_Unfollowable(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server []byte
	}{
		{"RFB 3.3", []byte("RFB 003.003\n"), nil},
		{"TLS security", []byte("RFB 003.008\n\x12"), nil},
		{"unknown client message", append(new(rfbClient).handshake(1).Bytes(), 99), nil},
		{"unknown server message", new(rfbClient).handshake(1).Bytes(), append(new(rfbServer).handshake().Bytes(), 77)},
		{"an encoding not allowed", new(rfbClient).handshake(1).Bytes(),
			append(new(rfbServer).handshake().Bytes(), 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 5)},
	} {
		_, _, err := filterBoth(t, RFBClipboardConfig{}, tc.client, tc.server, 4096)
		if err == nil {
			t.Errorf("%s: no error; want the console ended rather than the policy unenforced", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestFilterRFBClipboard_Encodings(t *testing.T) {
	var c rfbClient
	c.handshake(1)
	c.Write([]byte{rfbSetEncodings, 0, 0, 6})
	binary.Write(&c, binary.BigEndian, []int32{50, 7, 5, -314, 16, extendedClipboard}) // H.264, Tight, Hextile, alpha cursor, ZRLE
	var want rfbClient
	want.handshake(1)
	want.Write([]byte{rfbSetEncodings, 0, 0, 4})
	binary.Write(&want, binary.BigEndian, []int32{50, 7, 16, extendedClipboard})
	desk, _, err := filterBoth(t, RFBClipboardConfig{}, c.Bytes(), nil, 3)
	if err != nil || !bytes.Equal(desk, want.Bytes()) {
		t.Errorf("SetEncodings became %x, %v; want %x", desk, err, want.Bytes())
	}
}

// TestFilterRFBClipboard_MessagesWithNothingAfterTheirHeader: a message
// whose header says nothing more follows (a SetDesktopSize of no screens,
// a SetEncodings of none, a Fence without data) passes at once, where the
// filter held it until the client's next message came: the screen hub's
// refusal of an empty layout never came back.
func TestFilterRFBClipboard_MessagesWithNothingAfterTheirHeader(t *testing.T) {
	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"SetDesktopSize of no screens", []byte{rfbSetDesktopSize, 0, 3, 0x20, 2, 0x58, 0, 0}},
		{"SetEncodings of none", []byte{rfbSetEncodings, 0, 0, 0}},
		{"Fence without data", []byte{rfbFence, 0, 0, 0, 0, 0, 0, 1, 0}},
	} {
		client := new(rfbClient).handshake(1).Bytes()
		toDesktop, _, err := filterBoth(t, RFBClipboardConfig{ToDesktop: true}, append(client, tt.msg...), new(rfbServer).handshake().Bytes(), 64)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !bytes.HasSuffix(toDesktop, tt.msg) {
			t.Errorf("%s: the desktop got %x; want it to end with the message, %x", tt.name, toDesktop, tt.msg)
		}
	}
}
