package relay

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// rfbClient builds a client-to-server RFB stream.
type rfbClient struct{ bytes.Buffer }

func (c *rfbClient) handshake(security byte) *rfbClient {
	c.WriteString("RFB 003.008\n")
	c.WriteByte(security)
	if security == 2 {
		c.Write(make([]byte, 16))
	}
	c.WriteByte(1) // ClientInit: shared
	return c
}

func (c *rfbClient) setEncodings(n int) *rfbClient {
	c.Write([]byte{rfbSetEncodings, 0})
	binary.Write(c, binary.BigEndian, uint16(n))
	for i := range n {
		binary.Write(c, binary.BigEndian, int32(i-5))
	}
	return c
}

func (c *rfbClient) updateRequest() *rfbClient {
	c.Write([]byte{rfbFramebufferUpdateRequest, 1, 0, 0, 0, 0, 5, 0, 3, 32})
	return c
}

func (c *rfbClient) pixelFormat() *rfbClient {
	c.Write(append([]byte{rfbSetPixelFormat}, make([]byte, 19)...))
	return c
}

func (c *rfbClient) cutText(text string) *rfbClient {
	c.Write([]byte{rfbClientCutText, 0, 0, 0})
	binary.Write(c, binary.BigEndian, uint32(len(text)))
	c.WriteString(text)
	return c
}

// extendedCutText is ClientCutText in the extended clipboard format, with a
// negative length, as noVNC sends it to announce its capabilities.
func (c *rfbClient) extendedCutText() *rfbClient {
	c.Write([]byte{rfbClientCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xf8, 0x1f, 0, 0, 1, 0, 0, 0, 0})
	return c
}

func (c *rfbClient) fence(payload string) *rfbClient {
	c.Write([]byte{rfbFence, 0, 0, 0, 0, 0, 0, 1, byte(len(payload))})
	c.WriteString(payload)
	return c
}

func (c *rfbClient) key() *rfbClient {
	c.Write([]byte{rfbKeyEvent, 1, 0, 0, 0, 0, 0, 'a'})
	return c
}

func (c *rfbClient) pointer() *rfbClient {
	c.Write([]byte{rfbPointerEvent, 0, 0, 10, 0, 20})
	return c
}

func (c *rfbClient) qemuKey() *rfbClient {
	c.Write([]byte{rfbQEMU, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 30})
	return c
}

// feedAll feeds stream in chunks of size and reports whether any chunk was input.
func feedAll(d InputDetector, stream []byte, size int) bool {
	input := false
	for len(stream) > 0 {
		n := min(size, len(stream))
		input = d.Feed(stream[:n]) || input
		stream = stream[n:]
	}
	return input
}

func TestRFBInput(t *testing.T) {
	// Cut text and fence payloads hold bytes that look like key events.
	chatter := new(rfbClient).handshake(1).setEncodings(12).pixelFormat().updateRequest().
		cutText("\x04\x04\x04\x04\x05\x05").fence("\x04\x05\x04").extendedCutText().updateRequest().updateRequest().Bytes()
	for _, tc := range []struct {
		name   string
		stream []byte
		want   bool
	}{
		{"only frame requests and chatter", chatter, false},
		{"a key press", append(append([]byte{}, chatter...), new(rfbClient).key().Bytes()...), true},
		{"a mouse move", append(append([]byte{}, chatter...), new(rfbClient).pointer().Bytes()...), true},
		{"a QEMU extended key", append(append([]byte{}, chatter...), new(rfbClient).qemuKey().Bytes()...), true},
		{"vnc auth then chatter", new(rfbClient).handshake(2).updateRequest().Bytes(), false},
		{"vnc auth then a key", new(rfbClient).handshake(2).updateRequest().key().Bytes(), true},
		{"handshake bytes that look like input", []byte("RFB 003.008\n\x01\x01"), false},
	} {
		for _, size := range []int{1, 3, 7, 4096} {
			if got := feedAll(new(RFBInput), tc.stream, size); got != tc.want {
				t.Errorf("%s in chunks of %d: input = %v; want %v", tc.name, size, got, tc.want)
			}
		}
	}
}

func TestRFBInput_OnlyTheChunkWithInput(t *testing.T) {
	d := new(RFBInput)
	if d.Feed(new(rfbClient).handshake(1).updateRequest().Bytes()) {
		t.Fatal("handshake + update request reported as input")
	}
	key := new(rfbClient).key().Bytes()
	if d.Feed(key[:5]) {
		t.Error("half a key event reported as input before it was complete")
	}
	if !d.Feed(key[5:]) {
		t.Error("the rest of a key event not reported as input")
	}
	if d.Feed(new(rfbClient).updateRequest().updateRequest().Bytes()) {
		t.Error("update requests after a key reported as input")
	}
}

func TestRFBInput_UnknownSecurityCountsAsInput(t *testing.T) {
	d := new(RFBInput)
	d.Feed([]byte("RFB 003.008\n\x13")) // VeNCrypt: encrypted from here on
	if !d.Feed([]byte{3, 1, 0, 0}) {
		t.Error("after a security type the detector cannot follow, traffic should count as input")
	}
}

func TestKeystrokes(t *testing.T) {
	d := NewInputDetector("terminal")
	if d.Feed(nil) || !d.Feed([]byte("l")) {
		t.Error("terminal: want no input for nothing, input for a keystroke")
	}
}

// fastPath builds a client fast-path input PDU with the given events.
func fastPath(events ...[]byte) []byte {
	var body []byte
	for _, e := range events {
		body = append(body, e...)
	}
	total := 2 + len(body)
	return append([]byte{byte(len(events) << 2), byte(total)}, body...)
}

var (
	rdpScancode = []byte{0 << 5, 0x1e}                     // key 'a' down
	rdpMouse    = []byte{1 << 5, 0x00, 0x08, 10, 0, 20, 0} // pointer move
	rdpSync     = []byte{3<<5 | 0x02}                      // synchronize (num lock)
)

// slowPath builds a TPKT/X.224/MCS-framed share data PDU of pduType2.
func slowPath(pduType2 byte) []byte {
	share := []byte{
		0, 0, 0x17, 0x00, 0xe9, 0x03, // share control: length, pduType 0x17 (v1, data), source
		0x01, 0x00, 0x01, 0x00, 0, 1, 0, 0, pduType2, 0, 0, 0, // share data header
		0, 0, 0, 0, // some body
	}
	binary.LittleEndian.PutUint16(share, uint16(len(share)))
	mcs := append([]byte{0x64, 0, 6, 0x03, 0xeb, 0x70, byte(len(share))}, share...)
	pdu := append([]byte{0x03, 0, 0, 0, 0x02, 0xf0, 0x80}, mcs...)
	binary.BigEndian.PutUint16(pdu[2:], uint16(len(pdu)))
	return pdu
}

func TestRDPInput(t *testing.T) {
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	const pduControl, pduInput = 0x14, 0x1c
	for _, tc := range []struct {
		name   string
		stream []byte
		want   bool
	}{
		{"slow-path control and sync only", join(slowPath(pduControl), slowPath(0x1f), fastPath(rdpSync)), false},
		{"fast-path key", join(slowPath(pduControl), fastPath(rdpScancode)), true},
		{"fast-path mouse after sync", join(fastPath(rdpSync), fastPath(rdpSync, rdpMouse)), true},
		{"slow-path input event PDU", join(slowPath(pduControl), slowPath(pduInput)), true},
	} {
		for _, size := range []int{1, 5, 4096} {
			if got := feedAll(new(RDPInput), tc.stream, size); got != tc.want {
				t.Errorf("%s in chunks of %d: input = %v; want %v", tc.name, size, got, tc.want)
			}
		}
	}
}

func TestRDPInput_LongPDUsAreSkipped(t *testing.T) {
	// A large slow-path PDU whose body is full of bytes that look like
	// fast-path input must be skipped whole.
	big := slowPath(0x14)
	big = append(big, bytes.Repeat(fastPath(rdpScancode), 500)...)
	binary.BigEndian.PutUint16(big[2:], uint16(len(big)))
	d := new(RDPInput)
	if feedAll(d, big, 1000) {
		t.Error("a long non-input PDU was reported as input")
	}
	if !d.Feed(fastPath(rdpMouse)) {
		t.Error("the mouse move after it was not reported")
	}
}
