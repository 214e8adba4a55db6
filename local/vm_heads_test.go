package local

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// askHeadSize asks the VNC server on conn (no authentication) for a w x h
// screen, as a screen window's console does (SetDesktopSize), and returns
// the screen sizes it then sends until one is w x h or ctx ends. QEMU
// passes the request to the guest (status 4); only a guest that drives the
// head (its virtio-gpu driver) sets the mode that changes its size.
func askHeadSize(ctx context.Context, conn net.Conn, w, h int) (sizes []string, err error) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	r := bufio.NewReader(conn)
	b := make([]byte, 24)
	if _, err := io.ReadFull(r, b[:12]); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	conn.Write([]byte("RFB 003.008\n"))
	if _, err := io.ReadFull(r, b[:1]); err != nil || b[0] == 0 {
		return nil, fmt.Errorf("security types: %v (%d)", err, b[0])
	}
	if _, err := io.ReadFull(r, make([]byte, b[0])); err != nil {
		return nil, err
	}
	conn.Write([]byte{1, 1}) // None; ClientInit shared
	if _, err := io.ReadFull(r, b[:4]); err != nil || binary.BigEndian.Uint32(b) != 0 {
		return nil, fmt.Errorf("security result: %v", err)
	}
	if _, err := io.ReadFull(r, b[:24]); err != nil {
		return nil, fmt.Errorf("server init: %w", err)
	}
	bpp := int(b[4])
	sizes = append(sizes, fmt.Sprintf("%dx%d", binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])))
	if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(b[20:]))); err != nil {
		return sizes, err
	}
	msg := []byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xfe, 0xcc} // SetEncodings: raw, ExtendedDesktopSize
	msg = append(msg, 251, 0)                                     // SetDesktopSize, one screen
	msg = binary.BigEndian.AppendUint16(msg, uint16(w))
	msg = binary.BigEndian.AppendUint16(msg, uint16(h))
	msg = append(msg, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	msg = binary.BigEndian.AppendUint16(msg, uint16(w))
	msg = binary.BigEndian.AppendUint16(msg, uint16(h))
	msg = append(msg, 0, 0, 0, 0)
	update := []byte{3, 1, 0, 0, 0, 0, 0, 1, 0, 1} // one pixel, incremental
	if _, err := conn.Write(append(msg, update...)); err != nil {
		return sizes, err
	}
	want := fmt.Sprintf("%dx%d", w, h)
	for {
		if _, err := io.ReadFull(r, b[:1]); err != nil {
			return sizes, err
		}
		switch b[0] {
		case 0: // FramebufferUpdate
			if _, err := io.ReadFull(r, b[:3]); err != nil {
				return sizes, err
			}
			for range binary.BigEndian.Uint16(b[1:]) {
				if _, err := io.ReadFull(r, b[:12]); err != nil {
					return sizes, err
				}
				rw, rh := int(binary.BigEndian.Uint16(b[4:])), int(binary.BigEndian.Uint16(b[6:]))
				switch int32(binary.BigEndian.Uint32(b[8:])) {
				case 0:
					_, err = io.ReadFull(r, make([]byte, rw*rh*bpp/8))
				case -308:
					sizes = append(sizes, fmt.Sprintf("%dx%d", rw, rh))
					if _, err = io.ReadFull(r, b[:4]); err == nil {
						_, err = io.ReadFull(r, make([]byte, 16*int(b[0])))
					}
				default:
					return sizes, fmt.Errorf("encoding %d not asked for", int32(binary.BigEndian.Uint32(b[8:])))
				}
				if err != nil {
					return sizes, err
				}
			}
			if sizes[len(sizes)-1] == want {
				return sizes, nil
			}
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write(update); err != nil {
				return sizes, err
			}
		case 2: // Bell
		case 3: // ServerCutText
			if _, err := io.ReadFull(r, b[:7]); err != nil {
				return sizes, err
			}
			if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(b[3:]))); err != nil {
				return sizes, err
			}
		default:
			return sizes, fmt.Errorf("server message %d", b[0])
		}
	}
}
