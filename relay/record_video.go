package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
)

// maxVideoRecordQueue bounds the video a VideoRecorder holds while the
// console's stream is inside a message: past it, frames are refused (the
// hub then sends that viewer the next key frame).
const maxVideoRecordQueue = 8 << 20

// ErrNotFollowed is RecordVideo's error for a console whose RFB stream
// no filter follows: where a message ends is not known there.
var ErrNotFollowed = errors.New("relay: the console's RFB stream is not followed (FilterRFBClipboard)")

// VideoRecorder records a VNC console whose H.264 goes to the browser
// another way (a WebRTC track) beside its RFB stream: it is the
// console's Recorder (Options.Recorder), and Video puts each access unit
// into the recording's server stream as a FramebufferUpdate of one Open
// H.264 rectangle of the whole screen, where a server message ends, so
// that the player draws the video as the console's own stream would
// have carried it. The frame is recorded as the track takes it, not
// before: a recording that fails ends the console at its next bytes, and
// no more frames are taken meanwhile.
type VideoRecorder struct {
	Recorder
	at   func() bool // whether the stream read so far ends a message
	kick chan struct{}

	// wmu orders the writes to the Recorder; mu guards the rest, and is
	// never held across a write (Video takes it under the hub's lock).
	wmu      sync.Mutex
	mu       sync.Mutex
	boundary bool   // the server bytes recorded so far end a message
	queue    []byte // whole messages waiting for a boundary
	err      error  // the recorder's, once it failed
}

// RecordVideo returns rec, recording the server stream of conn (what
// FilterRFBClipboard returned, whose reads the console's Pipe records),
// as a VideoRecorder until ctx ends.
func RecordVideo(ctx context.Context, rec Recorder, conn net.Conn) (*VideoRecorder, error) {
	f, ok := conn.(*rfbFilter)
	if !ok {
		return nil, ErrNotFollowed
	}
	v := &VideoRecorder{Recorder: rec, at: f.atBoundary, kick: make(chan struct{}, 1)}
	go v.run(ctx)
	return v, nil
}

// Output implements Recorder: it records p, the server bytes the console
// just read, then the video that waited for the message p ends.
func (v *VideoRecorder) Output(p []byte) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	err := v.Recorder.Output(p)
	at := err == nil && v.at()
	v.mu.Lock()
	v.boundary = at
	if err != nil {
		v.err = err
	}
	v.mu.Unlock()
	if err != nil {
		return err
	}
	return v.flush()
}

// Video records au, an access unit of a w×h screen (key: a key frame,
// where a decoder starts afresh), and reports whether it was taken; it
// does not block (the hub's lock may be held).
func (v *VideoRecorder) Video(au []byte, key bool, w, h int) bool {
	var flags uint32
	if key {
		flags = 1 // reset this rectangle's decoder
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil || len(v.queue)+len(au) > maxVideoRecordQueue {
		return false
	}
	b := append(v.queue, 0, 0, 0, 1, 0, 0, 0, 0) // FramebufferUpdate of one rectangle at 0,0
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = binary.BigEndian.AppendUint32(b, 50) // Open H.264
	b = binary.BigEndian.AppendUint32(b, uint32(len(au)))
	b = binary.BigEndian.AppendUint32(b, flags)
	v.queue = append(b, au...)
	select {
	case v.kick <- struct{}{}:
	default:
	}
	return true
}

// run writes the waiting video when the stream is at a boundary (a quiet
// stream: its last read ended a message), until ctx ends.
func (v *VideoRecorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.kick:
		}
		v.wmu.Lock()
		v.flush()
		v.wmu.Unlock()
	}
}

// flush records the waiting video if the stream is at a boundary; v.wmu
// is held.
func (v *VideoRecorder) flush() error {
	v.mu.Lock()
	q, err := v.queue, v.err
	if !v.boundary || err != nil {
		q = nil
	} else {
		v.queue = nil
	}
	v.mu.Unlock()
	if len(q) == 0 {
		return err
	}
	if err := v.Recorder.Output(q); err != nil {
		v.mu.Lock()
		v.err = err
		v.mu.Unlock()
		return err
	}
	return nil
}

// atBoundary reports whether the desktop's bytes the filter has given out
// end a server message: a message of one's own may follow them. Call it
// between Reads.
func (f *rfbFilter) atBoundary() bool {
	s := &f.down.stream
	return len(f.pending) == 0 && s.boundary && len(s.spans) == 0 && len(s.hdr) == 0
}
