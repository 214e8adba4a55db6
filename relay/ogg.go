package relay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// OggPackets reads the packets of one logical Ogg stream (RFC 3533), such
// as the Ogg Opus stream of a desktop's encoder, so that each can go to the
// browser's decoder on its own. It checks the framing (capture pattern,
// version, lacing) but not the pages' CRCs: the stream comes from a local
// pipe, and a damaged one ends in an error, never a panic or a huge
// allocation (a packet is at most MaxOggPacket bytes).
type OggPackets struct {
	r       *bufio.Reader
	partial []byte // a packet continued on the next page
	queue   [][]byte
	serial  uint32
	started bool
}

// MaxOggPacket bounds one packet; Opus packets are at most 1275 bytes per
// frame, 120 ms at most per packet.
const MaxOggPacket = 64 << 10

// NewOggPackets returns a packet reader of r.
func NewOggPackets(r io.Reader) *OggPackets { return &OggPackets{r: bufio.NewReaderSize(r, 8<<10)} }

// Next returns the next packet (valid until the next call).
func (o *OggPackets) Next() ([]byte, error) {
	for len(o.queue) == 0 {
		if err := o.page(); err != nil {
			return nil, err
		}
	}
	p := o.queue[0]
	o.queue = o.queue[1:]
	return p, nil
}

// page reads one page and queues the packets it completes.
func (o *OggPackets) page() error {
	var h [27]byte
	if _, err := io.ReadFull(o.r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("ogg: a page header cut short")
		}
		return err // io.EOF: the stream ended between pages
	}
	if !bytes.Equal(h[:4], []byte("OggS")) || h[4] != 0 {
		return fmt.Errorf("ogg: not an Ogg page (% x)", h[:5])
	}
	serial := binary.LittleEndian.Uint32(h[14:18])
	if !o.started {
		o.serial, o.started = serial, true
	} else if serial != o.serial {
		return fmt.Errorf("ogg: a second logical stream (serial %d): want one", serial)
	}
	continued := h[5]&1 != 0
	if !continued && len(o.partial) > 0 {
		return errors.New("ogg: a packet left unfinished")
	}
	lacing := make([]byte, h[26])
	if _, err := io.ReadFull(o.r, lacing); err != nil {
		return fmt.Errorf("ogg: lacing cut short: %w", unexpected(err))
	}
	total := 0
	for _, l := range lacing {
		total += int(l)
	}
	body := make([]byte, total)
	if _, err := io.ReadFull(o.r, body); err != nil {
		return fmt.Errorf("ogg: page body cut short: %w", unexpected(err))
	}
	pkt := o.partial
	for _, l := range lacing {
		pkt = append(pkt, body[:l]...)
		body = body[l:]
		if len(pkt) > MaxOggPacket {
			return fmt.Errorf("ogg: a packet over %d bytes", MaxOggPacket)
		}
		if l < 255 { // the packet ends here
			o.queue = append(o.queue, pkt)
			pkt = nil
		}
	}
	o.partial = pkt
	return nil
}

// unexpected turns the end of the stream inside a page into
// io.ErrUnexpectedEOF: only a stream that ends between pages ends well.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
