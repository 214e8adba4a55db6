// Package testrfb builds RFB client messages for tests that speak to a
// screen hub as a client would (package rfb's own tests and the e2e
// attack rows). It imports nothing of the product, so that package rfb's
// internal tests can use it without a cycle.
package testrfb

import "encoding/binary"

// SetDesktopSize is an RFB SetDesktopSize message (type 251) asking for a
// w×h desktop with screens, each {id, x, y, w, h}; a negative place or
// size is sent as RFB's 16 bits carry it, so tests can ask for what no
// honest client would.
func SetDesktopSize(w, h int, screens ...[5]int) []byte {
	msg := []byte{251, 0}
	msg = binary.BigEndian.AppendUint16(msg, uint16(w))
	msg = binary.BigEndian.AppendUint16(msg, uint16(h))
	msg = append(msg, byte(len(screens)), 0)
	for _, s := range screens {
		msg = binary.BigEndian.AppendUint32(msg, uint32(s[0]))
		for _, v := range s[1:] {
			msg = binary.BigEndian.AppendUint16(msg, uint16(v))
		}
		msg = binary.BigEndian.AppendUint32(msg, 0) // flags
	}
	return msg
}
