package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// x224Probe is an X.224 Connection Request in a TPKT, carrying an RDP
// Negotiation Request for TLS, CredSSP and RDSTLS ([MS-RDPBCGR] 2.2.1.1).
// It is what every RDP client sends first, so any RDP server answers it.
var x224Probe = []byte{
	0x03, 0x00, 0x00, 0x13, // TPKT: version 3, length 19
	0x0e, 0xe0, 0x00, 0x00, 0x00, 0x00, 0x00, // X.224 CR: LI 14, CR CDT, dst-ref, src-ref, class 0
	0x01, 0x00, 0x08, 0x00, 0x0b, 0x00, 0x00, 0x00, // RDP_NEG_REQ: type 1, flags 0, length 8, TLS|CredSSP|RDSTLS
}

// ErrNotRDP is returned (wrapped) by ProbeRDP when the server answered, but
// not with an X.224 Connection Confirm.
var ErrNotRDP = errors.New("not an RDP server")

// ProbeRDP reports whether conn is an RDP server: it sends an X.224
// Connection Request and reads the answer, until ctx ends. A Connection
// Confirm counts even when it carries a negotiation failure, since the
// server did answer. It does not close conn.
func ProbeRDP(ctx context.Context, conn net.Conn) error {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(x224Probe); err != nil {
		return fmt.Errorf("rdp probe: send X.224 request: %w", err)
	}
	var hdr [7]byte // TPKT header + X.224 LI and code
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("rdp probe: read X.224 answer: %w", err)
	}
	n := binary.BigEndian.Uint16(hdr[2:4])
	if hdr[0] != 0x03 || n < 7 || hdr[5]&0xf0 != 0xd0 {
		return fmt.Errorf("rdp probe: answer % x: %w", hdr[:], ErrNotRDP)
	}
	return nil
}
