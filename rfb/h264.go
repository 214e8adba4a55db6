package rfb

import (
	"bytes"
	"encoding/binary"
)

// encH264 is RFB's Open H.264 encoding, registered by TigerVNC: each
// rectangle is U32 length, U32 flags, then an Annex-B access unit.
const encH264 int32 = 50

// h264ResetContext is the Open H.264 flag that tells the viewer to drop
// its decoder for the rectangle before this payload.
const h264ResetContext = 1

// maxAccessUnit bounds one access unit from the encoder: a 1920×1080 key
// frame of noise at the bitrates used here is well under 1 MiB.
const maxAccessUnit = 8 << 20

// NAL unit types an access unit may hold here.
const (
	nalSlice = 1
	nalIDR   = 5
	nalSEI   = 6
	nalSPS   = 7
	nalPPS   = 8
	nalAUD   = 9
)

// accessUnit is one checked frame of H.264, in Annex-B, ready to send.
type accessUnit struct {
	data []byte
	key  bool // an IDR, with the SPS and PPS in front: a viewer may start here
}

// annexB checks the encoder's access units and keeps what a viewer
// joining at a key frame needs. noVNC's decoder (core/decoders/h264.js)
// takes one frame per slice, configures itself from an SPS before an IDR
// and warns on any NAL type but 1, 5, 6, 7, 8: so an access unit must be
// SEI, SPS, PPS in any order, then exactly one slice, last; access unit
// delimiters are dropped; an IDR without its SPS and PPS gets the last
// ones seen.
type annexB struct {
	sps, pps []byte // the last seen, each with its start code
}

// check returns b as an access unit a viewer can decode, or an error for
// a stream that breaks the rules above (an encoder gone wrong, or a
// desktop's stream passed through: H.264 then ends for that desktop, not
// the console).
func (a *annexB) check(b []byte) (accessUnit, error) {
	if len(b) > maxAccessUnit {
		return accessUnit{}, protocolErr("an H.264 access unit of %d bytes", len(b))
	}
	nals, err := splitNALs(b)
	if err != nil {
		return accessUnit{}, err
	}
	var out []byte
	var key, sps, pps bool
	for i, n := range nals {
		typ := n[startCodeLen(n)] & 0x1f
		last := i == len(nals)-1
		switch typ {
		case nalAUD:
			continue
		case nalSPS:
			a.sps, sps = append(a.sps[:0], n...), true
		case nalPPS:
			a.pps, pps = append(a.pps[:0], n...), true
		case nalSEI:
		case nalSlice, nalIDR:
			if !last {
				return accessUnit{}, protocolErr("an H.264 access unit with more than one slice, or a slice before other units")
			}
			key = typ == nalIDR
			if key && (!sps || !pps) {
				if a.sps == nil || a.pps == nil {
					return accessUnit{}, protocolErr("an H.264 key frame before any SPS and PPS")
				}
				if !sps {
					out = append(out, a.sps...)
				}
				if !pps {
					out = append(out, a.pps...)
				}
			}
		default:
			return accessUnit{}, protocolErr("H.264 NAL unit type %d", typ)
		}
		if last && typ != nalSlice && typ != nalIDR {
			return accessUnit{}, protocolErr("an H.264 access unit with no slice")
		}
		out = append(out, n...)
	}
	return accessUnit{data: out, key: key}, nil
}

// splitNALs splits an Annex-B byte stream into its NAL units, each with
// its start code. It refuses bytes before the first start code, an empty
// unit and a unit with the forbidden bit set.
func splitNALs(b []byte) ([][]byte, error) {
	if startCodeLen(b) == 0 {
		return nil, protocolErr("an H.264 access unit that does not start with a start code")
	}
	var nals [][]byte
	for len(b) > 0 {
		sc := startCodeLen(b)
		next := nextStartCode(b[sc:])
		end := len(b)
		if next >= 0 {
			end = sc + next
		}
		if end == sc {
			return nil, protocolErr("an empty H.264 NAL unit")
		}
		if b[sc]&0x80 != 0 {
			return nil, protocolErr("an H.264 NAL unit with the forbidden bit set")
		}
		nals = append(nals, b[:end])
		b = b[end:]
	}
	return nals, nil
}

// startCodeLen is the length of the start code b begins with (3 or 4),
// or 0.
func startCodeLen(b []byte) int {
	switch {
	case len(b) >= 4 && b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 1:
		return 4
	case len(b) >= 3 && b[0] == 0 && b[1] == 0 && b[2] == 1:
		return 3
	}
	return 0
}

// nextStartCode is the index of the next start code in b (a 4-byte one
// counted from its leading zero), or -1.
func nextStartCode(b []byte) int {
	i := bytes.Index(b, []byte{0, 0, 1})
	if i > 0 && b[i-1] == 0 {
		i--
	}
	return i
}

// h264Rect appends an Open H.264 rectangle of the whole screen,
// w×h, carrying au, with flags.
func (w *updateWriter) h264Rect(width, height int, flags uint32, au []byte) {
	w.rect(0, 0, width, height, encH264)
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(len(au)))
	w.b = binary.BigEndian.AppendUint32(w.b, flags)
	w.b = append(w.b, au...)
}
