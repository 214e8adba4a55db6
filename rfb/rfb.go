// Package rfb shares one RFB (VNC) connection to a desktop among many
// clients. A Hub is the desktop's one client: it keeps the framebuffer the
// desktop draws and serves every browser as an RFB server of its own,
// answering each one's update requests from that framebuffer at the
// client's own pace, with the client's own pixel format and encoding. A
// slow or stalled client only falls behind itself, and the desktop (a
// KubeVirt VMI, which takes one VNC client) sees a single viewer however
// many people watch. Input reaches the desktop only from clients that hold
// control.
package rfb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Message types, client to server.
const (
	msgSetPixelFormat = 0
	msgSetEncodings   = 2
	msgUpdateRequest  = 3
	msgKeyEvent       = 4
	msgPointerEvent   = 5
	msgClientCutText  = 6
	msgSetDesktopSize = 251
)

// Message types, server to client.
const (
	msgFramebufferUpdate = 0
	msgSetColourMap      = 1
	msgBell              = 2
	msgServerCutText     = 3
)

// Encodings and pseudo-encodings.
const (
	encRaw                 int32 = 0
	encCopyRect            int32 = 1
	encZRLE                int32 = 16
	encDesktopSize         int32 = -223
	encLastRect            int32 = -224
	encExtendedDesktopSize int32 = -308
	encExtendedClipboard   int32 = -1063131698 // 0xC0A1E5CE
)

// maxCutText bounds a cut text the hub holds whole to pass on; a longer one
// (a desktop or a client flooding) is read through and dropped.
const maxCutText = 1 << 20

// maxDimension bounds a framebuffer side: RFB's are 16-bit, and 16384 keeps
// a framebuffer under 1 GiB.
const maxDimension = 16384

// statusInvalidLayout is ExtendedDesktopSize's answer to a SetDesktopSize
// whose screen layout the server cannot take.
const statusInvalidLayout = 3

// ErrProtocol wraps what a peer sent that breaks the protocol.
var ErrProtocol = errors.New("rfb: protocol error")

func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// PixelFormat is RFB's PIXEL_FORMAT, for true colour only.
type PixelFormat struct {
	BitsPerPixel, Depth uint8
	BigEndian           bool
	RedShift            uint8
	GreenShift          uint8
	BlueShift           uint8
}

// canonical is the hub's own format, the desktop's and noVNC's: 32 bits,
// little-endian, red in the lowest byte, so pixels lie in memory as R, G,
// B, X, as a canvas wants them.
var canonical = PixelFormat{BitsPerPixel: 32, Depth: 24, RedShift: 0, GreenShift: 8, BlueShift: 16}

// marshal returns f as the 16-byte PIXEL_FORMAT.
func (f PixelFormat) marshal() []byte {
	b := make([]byte, 16)
	b[0], b[1] = f.BitsPerPixel, f.Depth
	if f.BigEndian {
		b[2] = 1
	}
	b[3] = 1 // true colour
	binary.BigEndian.PutUint16(b[4:], 255)
	binary.BigEndian.PutUint16(b[6:], 255)
	binary.BigEndian.PutUint16(b[8:], 255)
	b[10], b[11], b[12] = f.RedShift, f.GreenShift, f.BlueShift
	return b
}

// parsePixelFormat reads a PIXEL_FORMAT a client asks for. The hub serves
// 32-bit true colour with 8 bits per primary at any byte-aligned shifts;
// anything else is refused with a reason.
func parsePixelFormat(b []byte) (PixelFormat, error) {
	f := PixelFormat{BitsPerPixel: b[0], Depth: b[1], BigEndian: b[2] != 0, RedShift: b[10], GreenShift: b[11], BlueShift: b[12]}
	if b[3] == 0 {
		return f, protocolErr("a colour-map pixel format, which the portal does not serve")
	}
	if f.BitsPerPixel != 32 {
		return f, protocolErr("%d bits per pixel; the portal serves 32", f.BitsPerPixel)
	}
	for _, m := range [][]byte{b[4:6], b[6:8], b[8:10]} {
		if binary.BigEndian.Uint16(m) != 255 {
			return f, protocolErr("a colour maximum of %d; the portal serves 255", binary.BigEndian.Uint16(m))
		}
	}
	seen := 0
	for _, s := range []uint8{f.RedShift, f.GreenShift, f.BlueShift} {
		if s%8 != 0 || s > 24 || seen&(1<<(s/8)) != 0 {
			return f, protocolErr("colour shifts %d/%d/%d", f.RedShift, f.GreenShift, f.BlueShift)
		}
		seen |= 1 << (s / 8)
	}
	return f, nil
}

// layout returns, for f, the wire index of each of R, G, B in a 4-byte
// pixel and the index of the unused byte.
func (f PixelFormat) layout() (r, g, b, unused int) {
	idx := func(shift uint8) int {
		if f.BigEndian {
			return 3 - int(shift/8)
		}
		return int(shift / 8)
	}
	r, g, b = idx(f.RedShift), idx(f.GreenShift), idx(f.BlueShift)
	unused = 6 - r - g - b
	return
}

// cpixel reports the size of a ZRLE CPIXEL in f: 3 where the unused byte is
// the most or least significant one and depth allows, else 4.
func (f PixelFormat) cpixel() int {
	_, _, _, u := f.layout()
	if f.Depth <= 24 && (u == 0 || u == 3) {
		return 3
	}
	return 4
}

// readFull reads exactly len(b) bytes.
func readFull(r io.Reader, b []byte) error {
	_, err := io.ReadFull(r, b)
	return err
}

// discard reads and drops n bytes.
func discard(r io.Reader, n int64) error {
	_, err := io.CopyN(io.Discard, r, n)
	return err
}

// isEOF reports whether err is a connection's plain end.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}
