// Package relay moves bytes between a browser's websocket and a desktop's
// stream (VNC, serial console, terminal, RDP after RDCleanPath).
//
// It knows bytes, protocols and dialers, never users or pages: callers decide
// who may connect and record what happened from the returned Stats. Every
// goroutine a relay starts has ended by the time its function returns.
package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// DefaultBufferSize is the copy buffer size for each direction. The
	// buffers are lent only while bytes move, so it costs an idle console
	// nothing; 64 KiB reads halve the desktop reads of a 32 KiB one.
	DefaultBufferSize = 64 << 10
	// DefaultMaxMessage is the largest client message accepted by default.
	DefaultMaxMessage = 1 << 20

	// closeGrace bounds the websocket closing handshake: how long the relay
	// waits for the client to answer its close frame before dropping the
	// connection. Waiting at all keeps the close frame from being lost to a
	// TCP reset when the client still has input in flight.
	closeGrace = time.Second
)

// Stats counts what crossed a relay.
type Stats struct {
	// BytesIn is the number of bytes written to the desktop (client to desktop).
	BytesIn int64
	// BytesOut is the number of bytes sent to the client (desktop to client).
	BytesOut int64
}

// Counters accumulates byte counts while relays run, so that a caller can
// read them before Pipe returns. The zero value is ready to use and it is
// safe for concurrent use; one Counters may be shared by several relays.
type Counters struct {
	in, out atomic.Int64
}

// Stats returns the bytes counted so far.
func (c *Counters) Stats() Stats {
	return Stats{BytesIn: c.in.Load(), BytesOut: c.out.Load()}
}

// Options tunes Pipe. The zero value is ready to use.
//
// Client text frames and binary frames are both forwarded as their bytes: a
// desktop stream has no frame types, and xterm.js sends keystrokes as text
// frames. Frames to the client are always binary.
type Options struct {
	// OnInput, if set, is called with each client-to-desktop chunk before it
	// is written to the desktop, for example to spot RFB KeyEvent and
	// PointerEvent messages. Chunks follow the byte stream: a protocol
	// message may be split across calls. It is called from one goroutine at
	// a time, holds up the relay while it runs, and must not retain p.
	OnInput func(p []byte)

	// Filter, if set, rewrites each client-to-desktop chunk before OnInput
	// sees it and the desktop gets it; what it returns is written (it may
	// be p, shorter, or empty). A view-only watcher's RFB input is dropped
	// this way (see RFBViewOnly). Called like OnInput.
	Filter func(p []byte) []byte

	// Counters, if set, receives the byte counts as they happen.
	Counters *Counters

	// BufferSize is the copy buffer size for each direction; zero or less
	// means DefaultBufferSize. It also bounds the size of the frames sent
	// to the client.
	BufferSize int

	// MaxMessage is the largest client message accepted, in bytes; zero
	// means DefaultMaxMessage and a negative value means no limit. A larger
	// message ends the relay with close code 1009 (message too big).
	MaxMessage int64

	// Control, if set, sees each short client text message (up to 256
	// bytes) whole before it is forwarded; when it returns true the message
	// is consumed and does not reach the desktop. Terminal resizes use it.
	Control func(p []byte) bool

	// Text, if set, takes every client text message (up to MaxText
	// bytes; a longer one is dropped) instead of the desktop: a VNC
	// console's signalling beside its RFB stream, which noVNC sends only
	// as binary. send writes a text message to the client, in turn with
	// the desktop's bytes; it fails once the relay has ended. Text is
	// called from the client's reader: it must not block for long.
	Text func(msg []byte, send func([]byte) error)

	// Recorder, if set, records the session: each chunk before it is
	// passed on, and terminal resizes. When it fails the relay ends (close
	// code 1001 with the reason) and Pipe's error wraps ErrRecording.
	Recorder Recorder

	// PingEvery, if positive, sends the client a ping this often and ends
	// the relay when nothing (no message, no pong) came back for twice as
	// long, so that a vanished client is noticed.
	PingEvery time.Duration

	// LinkGone, if set, is the close reason (code 1011) when the desktop
	// side is a link to another portal that dropped without a close frame
	// of its own: that portal went away (killed, its node lost), not the
	// desktop, and the client can say so. A link the far portal closed
	// with a reason, and any other failure, keep "desktop connection
	// failed". At most 123 bytes.
	LinkGone string
}

// side names the end of the relay a failure came from.
type side int

const (
	client side = iota
	desktop
	shutdown
	recording
)

// end reports why one direction of a relay stopped.
type end struct {
	side side
	err  error
}

// Pipe copies between the client websocket ws and the desktop stream conn
// until either side closes or ctx ends. It then closes both, waits for all its
// goroutines to end and returns the bytes it moved.
//
// When the desktop closes, the client gets close code 1000; when the desktop
// connection fails, 1011; when ctx ends, 1001; when the console moves to
// another portal server (HandedOver), 1012. In those cases Pipe waits up
// to a second for the client to answer the close frame, so the frame is not
// lost to a TCP reset. The 1001 close frame carries ctx's cause, if any, as
// its reason, so the client can tell the user why. A clean close from either side returns a nil error; an
// abnormal one returns its cause, and an ended ctx returns ctx.Err().
func Pipe(ctx context.Context, ws *websocket.Conn, conn net.Conn, opts Options) (Stats, error) {
	size := opts.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	switch {
	case opts.MaxMessage == 0:
		ws.SetReadLimit(DefaultMaxMessage)
	case opts.MaxMessage > 0:
		ws.SetReadLimit(opts.MaxMessage)
	default:
		ws.SetReadLimit(0)
	}
	counters := opts.Counters
	if counters == nil {
		counters = new(Counters)
	}

	// Room for every report: the client-to-desktop side may report a desktop
	// write failure and later its own end; the other side reports once.
	ends := make(chan end, 3)
	var wg sync.WaitGroup
	var stats Stats
	in := &desktopWriter{conn: conn, filter: opts.Filter, onInput: opts.OnInput, rec: opts.Recorder, counters: counters, ends: ends}
	control := opts.Control
	if rec := opts.Recorder; rec != nil && control != nil {
		control = func(p []byte) bool {
			if r, ok := ParseResize(p); ok {
				if err := rec.Resize(r); err != nil {
					in.fail(recording, err)
					return true
				}
			}
			return opts.Control(p)
		}
	}
	alive := newKeepalive(ws, opts.PingEvery)
	out := &clientWriter{ws: ws}
	var text func([]byte)
	if opts.Text != nil {
		text = func(msg []byte) { opts.Text(msg, out.text) }
	}
	var inErr error // the client-to-desktop side's read error, set before inDone closes
	inDone := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(inDone)
		inErr = clientToDesktop(ws, in, max(size, maxControl+1), control, alive, text)
		stats.BytesIn = in.n
		ends <- end{client, inErr}
	}()
	go func() {
		defer wg.Done()
		var e end
		stats.BytesOut, e = desktopToClient(conn, out, counters, opts.Recorder, size)
		ends <- e
	}()

	pingDone := make(chan struct{})
	if alive != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alive.ping(pingDone)
		}()
	}

	var first end
	select {
	case first = <-ends:
	case <-ctx.Done():
		first = end{shutdown, ctx.Err()}
	}
	close(pingDone)
	alive.stop()

	var err error
	switch first.side {
	case client:
		// The client is gone or closed: gorilla has already answered its
		// close frame (or sent 1009 for an oversized message).
		conn.Close()
		ws.Close()
		err = first.err
	case desktop, shutdown, recording:
		code, reason := websocket.CloseNormalClosure, "desktop closed the connection"
		moved := handedOver(first.err)
		switch {
		case first.side == shutdown:
			code, reason = websocket.CloseGoingAway, CloseReason(ctx)
		case first.side == recording:
			code, reason = websocket.CloseGoingAway, recordingReason(first.err)
		case moved != nil:
			code, reason = moved.Code, moved.Text
		case !errors.Is(first.err, io.EOF):
			code, reason = websocket.CloseInternalServerErr, "desktop connection failed"
			if opts.LinkGone != "" && linkDropped(first.err) {
				reason = opts.LinkGone
			}
		}
		deadline := time.Now().Add(closeGrace)
		conn.Close()
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
		// Let the client answer; its close frame (or the deadline) ends the
		// client-to-desktop side, which discards input once conn is closed.
		ws.SetReadDeadline(deadline)
		<-inDone
		ws.Close()
		err = first.err
		if first.side == desktop && (errors.Is(err, io.EOF) || moved != nil) {
			err = nil
		}
		if first.side == recording {
			err = recordingFailure(err)
		}
	}
	wg.Wait()

	if first.side == client {
		// A write racing with the client's close frame fails with
		// ErrCloseSent; the close frame itself is the better answer.
		if errors.Is(err, websocket.ErrCloseSent) {
			err = inErr
		}
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
			err = nil
		}
	}
	return stats, err
}

// HandedOver returns the error a console's stream ends with when the
// console moves to another portal server (its owner drains): Pipe closes
// the client with code 1012 (service restart) and reason, which a page
// takes for a drop and says as it reconnects. A WSConn whose far end
// closed so reads it back, so a relay on another replica passes it on.
// reason is at most 123 bytes.
func HandedOver(reason string) error {
	return &websocket.CloseError{Code: websocket.CloseServiceRestart, Text: reason}
}

// Handover returns err when it is a HandedOver close (wrapped or not),
// else nil: what a hub passes on to its clients as the reason it ended.
func Handover(err error) error {
	if ce := handedOver(err); ce != nil {
		return ce
	}
	return nil
}

// handedOver returns err's HandedOver close, else nil.
func handedOver(err error) *websocket.CloseError {
	var ce *websocket.CloseError
	if errors.As(err, &ce) && ce.Code == websocket.CloseServiceRestart {
		return ce
	}
	return nil
}

// linkDropped reports whether err ended a websocket stream (WSConn) without
// a close frame from its far end: the connection dropped or was reset.
func linkDropped(err error) bool {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code == websocket.CloseAbnormalClosure
	}
	var oe *net.OpError // reset
	return errors.As(err, &oe)
}

// CloseReason is the close frame's text when ctx ends: the cause given to
// context.WithCancelCause (e.g. "released by an admin"), else "session ended".
// A close frame's reason is at most 123 bytes.
func CloseReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return "session ended"
	}
	reason := cause.Error()
	if len(reason) > 123 {
		reason = strings.ToValidUTF8(reason[:120], "") + "..."
	}
	return reason
}

// clientToDesktop forwards client messages into w until reading ws fails,
// and returns that failure. While it waits for a message it holds only
// gorilla's small read buffer; each message is read into a lent buffer of
// size bytes, a whole buffer at a time, so the desktop gets one write per
// message (or per size bytes of a longer one). Short text messages are
// offered to control first, when it is set; with text set, every text
// message goes to it instead (readText).
func clientToDesktop(ws *websocket.Conn, w *desktopWriter, size int, control func([]byte) bool, alive *keepalive, text func([]byte)) error {
	for {
		// Text and binary messages alike are bytes for the desktop.
		mt, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		alive.extend()
		if text != nil && mt == websocket.TextMessage {
			if err := readText(r, text); err != nil {
				return err
			}
			continue
		}
		buf := getBuffer(size)
		err = forwardMessage(r, w, *buf, control != nil && mt == websocket.TextMessage, control)
		putBuffer(buf)
		if err != nil {
			return err
		}
	}
}

// forwardMessage writes the message r to w through buf. w never fails: see
// desktopWriter.
func forwardMessage(r io.Reader, w *desktopWriter, buf []byte, offer bool, control func([]byte) bool) error {
	if offer {
		n, err := io.ReadFull(r, buf[:maxControl+1])
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // the whole message
			if n == 0 || !control(buf[:n]) {
				w.Write(buf[:n])
			}
			return nil
		} else if err != nil {
			return err
		}
		w.Write(buf[:n]) // too long for a control message
	}
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			w.Write(buf[:n])
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF): // the end of the message
			return nil
		case err != nil:
			return err
		}
	}
}

// desktopWriter writes client input to the desktop. After the first write
// error it reports the desktop's end and discards, so that the client side
// keeps reading and can finish the websocket closing handshake.
type desktopWriter struct {
	conn     net.Conn
	filter   func([]byte) []byte
	onInput  func([]byte)
	rec      Recorder
	counters *Counters
	ends     chan<- end
	n        int64
	failed   bool
}

// Write implements io.Writer.
func (w *desktopWriter) Write(p []byte) (int, error) {
	if w.failed {
		return len(p), nil
	}
	all := len(p)
	if w.filter != nil {
		if p = w.filter(p); len(p) == 0 {
			return all, nil
		}
	}
	if w.onInput != nil {
		w.onInput(p)
	}
	if w.rec != nil {
		if err := w.rec.Input(p); err != nil {
			w.fail(recording, err)
			return all, nil
		}
	}
	n, err := w.conn.Write(p)
	w.n += int64(n)
	w.counters.in.Add(int64(n))
	if err != nil {
		w.fail(desktop, err)
	}
	return all, nil
}

// fail reports the end of the relay by s and discards from then on.
func (w *desktopWriter) fail(s side, err error) {
	if !w.failed {
		w.failed = true
		w.ends <- end{s, err}
	}
}

// desktopToClient sends everything read from conn to ws as binary messages
// of at most size bytes until either fails, and reports which side failed
// and why. A plain socket is read without holding a buffer while it is
// quiet; other conns keep a small one (burstReader).
func desktopToClient(conn net.Conn, ws *clientWriter, counters *Counters, rec Recorder, size int) (int64, end) {
	var read func() ([]byte, error)
	if raw := newRawReader(conn, size); raw != nil {
		defer raw.release()
		read = raw.read
	} else {
		b := newBurstReader(conn, size)
		defer b.release()
		read = b.read
	}
	var total int64
	for {
		p, err := read()
		if len(p) > 0 {
			if rec != nil {
				if rerr := rec.Output(p); rerr != nil {
					return total, end{recording, rerr}
				}
			}
			if werr := ws.binary(p); werr != nil {
				return total, end{client, werr}
			}
			total += int64(len(p))
			counters.out.Add(int64(len(p)))
		}
		if err != nil {
			return total, end{desktop, err}
		}
	}
}
