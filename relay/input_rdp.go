package relay

import "encoding/binary"

// rdpPeek is how much of a PDU's start RDPInput reads to classify it.
const rdpPeek = 48

// RDPInput finds input in the plaintext client-to-server stream of an RDP
// connection after TLS (what the RDCleanPath gateway relays): fast-path
// input events other than synchronize (MS-RDPBCGR 2.2.8.1.2), and
// slow-path Input Event PDUs (2.2.8.1.1.3, pduType2 0x1C).
type RDPInput struct {
	buf  []byte // the start of the current PDU
	skip int    // bytes of the current PDU still to skip
	lost bool   // framing lost: count everything as input from here on
}

// Feed implements InputDetector.
func (d *RDPInput) Feed(p []byte) bool {
	input := false
	for len(p) > 0 {
		if d.lost {
			return true
		}
		if d.skip > 0 {
			n := min(d.skip, len(p))
			d.skip -= n
			p = p[n:]
			continue
		}
		want := len(d.buf) + 1 // a byte at a time until the length is known
		if total := rdpLength(d.buf); total > 0 {
			want = min(total, rdpPeek)
		}
		n := min(want-len(d.buf), len(p))
		d.buf = append(d.buf, p[:n]...)
		p = p[n:]
		total := rdpLength(d.buf)
		if total < 0 {
			d.lost = true
			return true
		}
		if total == 0 || len(d.buf) < min(total, rdpPeek) {
			continue
		}
		input = input || rdpIsInput(d.buf)
		d.skip = total - len(d.buf)
		d.buf = d.buf[:0]
	}
	return input
}

// rdpLength returns the total length of the PDU starting at b, 0 when b is
// too short to tell, or -1 when b is not a PDU start.
func rdpLength(b []byte) int {
	switch {
	case len(b) == 0:
		return 0
	case b[0] == 0x03: // TPKT: version 3, reserved, big-endian length
		if len(b) < 4 {
			return 0
		}
		if n := int(binary.BigEndian.Uint16(b[2:4])); n >= 7 {
			return n
		}
		return -1
	case b[0]&0x03 == 0: // fast-path: 1- or 2-byte length after the header
		if len(b) < 2 {
			return 0
		}
		if b[1]&0x80 == 0 {
			if n := int(b[1]); n >= 2 {
				return n
			}
			return -1
		}
		if len(b) < 3 {
			return 0
		}
		// A length shorter than its own header is no PDU (found by
		// FuzzRDPInput: 0 read as "too short to tell" grew the buffer
		// without bound).
		if n := int(b[1]&0x7f)<<8 | int(b[2]); n >= 3 {
			return n
		}
		return -1
	}
	return -1
}

// rdpIsInput classifies a PDU from its first bytes.
func rdpIsInput(b []byte) bool {
	if b[0] == 0x03 {
		return rdpSlowPathInput(b)
	}
	// Fast-path: header, length (1 or 2 bytes), optional event count.
	events := int(b[0]>>2) & 0x0f
	i := 2
	if b[1]&0x80 != 0 {
		i = 3
	}
	if b[0]&0x80 != 0 { // encrypted (standard RDP security): cannot read events
		return true
	}
	if b[0]&0x40 != 0 { // secure checksum: 8-byte signature
		i += 8
	}
	if events == 0 && i < len(b) {
		events = int(b[i])
		i++
	}
	// Any event but synchronize (code 3, sent on focus changes) is a user's.
	for ; events > 0 && i < len(b); events-- {
		code := b[i] >> 5
		if code != 3 {
			return true
		}
		i++
	}
	return false
}

// rdpSlowPathInput reports whether a TPKT-framed PDU is an Input Event PDU:
// X.224 data, MCS Send Data Request, then a Share Control Header of a data
// PDU whose Share Data Header says pduType2 0x1C.
func rdpSlowPathInput(b []byte) bool {
	// TPKT (4) + X.224 data TPDU (3): 02 F0 80; then MCS SendDataRequest 0x64.
	if len(b) < 8 || b[4] != 0x02 || b[5] != 0xf0 || b[7]>>2 != 25 {
		return false
	}
	i := 8 + 2 + 2 + 1 // initiator, channel id, priority/segmentation
	if i >= len(b) {
		return false
	}
	if b[i]&0x80 != 0 { // PER length
		i += 2
	} else {
		i++
	}
	// A basic security header (4 bytes) may come first; the Share Control
	// Header's pduType carries version 1 in its high bits: try both.
	for _, off := range []int{i, i + 4} {
		if off+15 > len(b) {
			continue
		}
		pduType := binary.LittleEndian.Uint16(b[off+2:])
		if pduType&0xfff0 == 0x0010 && pduType&0x0f == 7 {
			return b[off+14] == 0x1c
		}
	}
	return false
}
