package relay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// RFB recording format (corral-rfb-v1).
//
// A VNC session is recorded as the byte streams that crossed the relay,
// from the RFB handshake on, so that a player can feed the server's side
// back to an RFB client (noVNC) and get the same framebuffer:
//
//	file    = magic header record*
//	magic   = "CORRAL-RFB 1\n"                      (13 bytes)
//	header  = length:uint32 JSON                    ({"version":1,"timestamp":unix seconds,"input":bool})
//	record  = dir:byte ms:uint32 length:uint32 data (all integers big-endian)
//
// dir is 'S' for server-to-client bytes and 'C' for client-to-server
// bytes; ms is the time since the header's timestamp in milliseconds; data
// is exactly as relayed, split wherever the relay's reads split it (a
// protocol message may span records). The client's records carry what a
// replay needs to interpret the server's bytes (its protocol version,
// security choice, ClientInit, SetPixelFormat, SetEncodings and update
// requests); its keys, pointer and clipboard only when the header says
// "input": true. Every record is one Write, so a file cut short is valid up
// to its last complete record.
const rfbMagic = "CORRAL-RFB 1\n"

// RFB recording directions.
const (
	RFBServer byte = 'S'
	RFBClient byte = 'C'
)

// maxRFBRecord bounds one record's data when reading a recording.
const maxRFBRecord = 16 << 20

// RFBRecordConfig configures an RFBRecorder.
type RFBRecordConfig struct {
	// Input records the client's keys, pointer and clipboard too.
	Input bool
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// RFBRecorder writes a VNC session in the corral-rfb-v1 format.
type RFBRecorder struct {
	w      io.Writer
	now    func() time.Time
	start  time.Time
	state  sticky
	filter *RFBViewOnly // drops user input from the client's records; nil records all
	buf    []byte       // the record being written
}

var _ Recorder = (*RFBRecorder)(nil)

// NewRFBRecorder writes the magic and header to w and returns a recorder
// of the records that follow.
func NewRFBRecorder(w io.Writer, cfg RFBRecordConfig) (*RFBRecorder, error) {
	r := &RFBRecorder{w: w, now: clock(cfg.Now)}
	r.start = r.now()
	if !cfg.Input {
		r.filter = new(RFBViewOnly)
	}
	hdr, _ := json.Marshal(RFBHeader{Version: 1, Timestamp: r.start.Unix(), Input: cfg.Input})
	buf := append([]byte(rfbMagic), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[len(rfbMagic):], uint32(len(hdr)))
	if _, err := w.Write(append(buf, hdr...)); err != nil {
		return nil, fmt.Errorf("relay: write RFB recording header: %w", err)
	}
	return r, nil
}

// Output implements Recorder.
func (r *RFBRecorder) Output(p []byte) error {
	return r.state.do(func() error { return r.record(RFBServer, p) })
}

// Input implements Recorder.
func (r *RFBRecorder) Input(p []byte) error {
	return r.state.do(func() error {
		if r.filter != nil {
			p = r.filter.Filter(p)
		}
		return r.record(RFBClient, p)
	})
}

// Resize implements Recorder; RFB has no resize control messages.
func (r *RFBRecorder) Resize(Resize) error { return nil }

func (r *RFBRecorder) record(dir byte, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	ms := max(r.now().Sub(r.start).Milliseconds(), 0)
	buf := append(r.buf[:0], dir)
	buf = binary.BigEndian.AppendUint32(buf, uint32(min(ms, 1<<32-1)))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(p)))
	buf = append(buf, p...)
	r.buf = buf // reused: calls are serialised by state
	if _, err := r.w.Write(buf); err != nil {
		return err // the writer's words: the session's end reason
	}
	return nil
}

// RFBHeader is the JSON header of an RFB recording.
type RFBHeader struct {
	Version   int   `json:"version"`
	Timestamp int64 `json:"timestamp"`
	Input     bool  `json:"input"`
}

// RFBRecord is one record of an RFB recording.
type RFBRecord struct {
	Dir  byte
	At   time.Duration
	Data []byte
}

// ReadRFBRecording reads an RFB recording, possibly cut short, calling fn
// for each complete record. It returns the header, the length of the valid
// prefix (magic, header and every complete record) and the time of the last
// record. A malformed file (wrong magic, a bad header, a record of an
// unknown direction or too long) is an error; a cut-short one is not.
func ReadRFBRecording(r io.Reader, fn func(RFBRecord) error) (hdr RFBHeader, valid int64, last time.Duration, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(rfbMagic)+4)
	if _, err := io.ReadFull(br, magic); err != nil {
		return hdr, 0, 0, fmt.Errorf("relay: not an RFB recording: %w", err)
	}
	if !bytes.Equal(magic[:len(rfbMagic)], []byte(rfbMagic)) {
		return hdr, 0, 0, errors.New("relay: not an RFB recording")
	}
	n := binary.BigEndian.Uint32(magic[len(rfbMagic):])
	if n > 4096 {
		return hdr, 0, 0, errors.New("relay: RFB recording header too long")
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(br, hb); err != nil {
		return hdr, 0, 0, fmt.Errorf("relay: RFB recording header: %w", err)
	}
	if err := json.Unmarshal(hb, &hdr); err != nil || hdr.Version != 1 {
		return hdr, 0, 0, fmt.Errorf("relay: RFB recording header %q is not version 1", hb)
	}
	valid = int64(len(magic)) + int64(n)
	head := make([]byte, 9)
	for {
		if _, err := io.ReadFull(br, head); err != nil {
			return hdr, valid, last, short(err)
		}
		if head[0] != RFBServer && head[0] != RFBClient {
			return hdr, valid, last, fmt.Errorf("relay: RFB recording record of direction %#x", head[0])
		}
		size := binary.BigEndian.Uint32(head[5:])
		if size > maxRFBRecord {
			return hdr, valid, last, fmt.Errorf("relay: RFB recording record of %d bytes", size)
		}
		rec := RFBRecord{Dir: head[0], At: time.Duration(binary.BigEndian.Uint32(head[1:])) * time.Millisecond, Data: make([]byte, size)}
		if _, err := io.ReadFull(br, rec.Data); err != nil {
			return hdr, valid, last, short(err)
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return hdr, valid, last, err
			}
		}
		valid += 9 + int64(size)
		last = rec.At
	}
}

// short turns the end of a recording into success: io.EOF at a record
// boundary, or a record cut short (which the valid prefix leaves out).
func short(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}
