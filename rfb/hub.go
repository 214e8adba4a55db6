package rfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// Hub is one desktop's RFB connection, shared by its clients (see the
// package comment). Its methods are safe for concurrent use.
type Hub struct {
	conn net.Conn
	name string
	qemu bool       // the desktop is QEMU's, which sends some updates unasked (isQEMU)
	wmu  sync.Mutex // writes to the desktop

	// The reader's own, used only by the goroutine of read.
	zrle    zrleDecoder
	scratch []byte

	mu        sync.Mutex
	fb        framebuffer
	screens   []byte       // ExtendedDesktopSize screen list: count, padding, screens
	clipCaps  []byte       // the desktop's Extended Clipboard caps, for new clients
	qemuKeys  bool         // the desktop takes QEMU extended key events (qemukeys.go)
	cursor    *cursorShape // the desktop's latest pointer shape, if it sent one
	cursorGen uint64       // counts the shapes
	clients   map[*client]struct{}
	resizer   *client // whose SetDesktopSize the desktop answers next
	err       error
	why       error // the reason CloseFor gave, which the clients read
	done      chan struct{}
	first     chan struct{} // closed after the desktop's first update
	gotFirst  bool          // the reader's own
	painted   Rect          // the reader's own: what of the screen pixels covered, until first
	vid       video         // the H.264 stream (h264_hub.go)
	log       *slog.Logger  // hears why H.264 stopped; nil: nobody
}

// ErrClosed is why a hub closed by Close ended.
var ErrClosed = errors.New("rfb: the shared console was closed")

// Connect shakes hands with the desktop on conn and returns its hub,
// reading the desktop until conn ends or Close. On an error conn is closed.
func Connect(conn net.Conn) (*Hub, error) {
	return connect(conn, "", nil)
}

// connect is Connect with the hub's H.264 encoder program ("" for none)
// and the logger that hears why H.264 stopped, both set before the hub's
// reader starts.
func connect(conn net.Conn, h264 string, log *slog.Logger) (*Hub, error) {
	h := &Hub{conn: conn, clients: map[*client]struct{}{}, done: make(chan struct{}), log: log}
	h.vid.program = h264
	if err := h.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	h.first = make(chan struct{})
	go func() {
		// An upstream that ends because the desktop moved says so
		// (relay.HandedOver): the clients are told, as for CloseFor.
		err := h.read()
		h.end(err, relay.Handover(err))
	}()
	// The first clients get the desktop's screen, not a black one.
	t := time.NewTimer(handshakeTimeout)
	defer t.Stop()
	select {
	case <-h.first:
		return h, nil
	case <-h.done:
		return nil, h.Err()
	case <-t.C:
		h.Close()
		return nil, fmt.Errorf("rfb: the desktop sent no screen within %v", handshakeTimeout)
	}
}

// end records why the hub ended, once, and closes it; why, if set, is
// what its clients read (CloseFor).
func (h *Hub) end(err, why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	if err == nil {
		err = ErrClosed
	}
	h.err, h.why = err, why
	h.conn.Close()
	close(h.done)
	if h.vid.settle != nil {
		h.vid.settle.Stop()
	}
	for c := range h.clients {
		c.wakeUp()
	}
}

// Close ends the hub and every client's console.
func (h *Hub) Close() error {
	h.end(ErrClosed, nil)
	return nil
}

// CloseFor ends the hub as Close does, for a reason its clients are told:
// their connections (Hubs.Join's) read why where they would read io.EOF,
// so that whoever relays one can say why the screen went (a draining
// replica hands its screens over to another).
func (h *Hub) CloseFor(why error) {
	h.end(ErrClosed, why)
}

// reason returns what CloseFor gave, nil while the hub runs or when it
// ended otherwise.
func (h *Hub) reason() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.why
}

// Done is closed when the hub has ended; Err then says why.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Err returns why the hub ended, or nil while it runs.
func (h *Hub) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Clients returns how many clients the hub serves now.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// Size returns the desktop's screen size.
func (h *Hub) Size() (w, hh int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fb.w, h.fb.h
}

// KeyWatcher is a desktop connection (a Dialer's conn may be one) that
// sees each key event before the desktop does. BeforeKey may hold the key
// back a moment, and every write to the desktop with it: the local
// backend frees Xvnc's spare keys there (local/desktop_keymap.go).
type KeyWatcher interface {
	BeforeKey(keysym uint32, down bool)
}

// send writes b, one whole client message, to the desktop, from one
// client at a time; a key event is shown to a KeyWatcher first.
func (h *Hub) send(b []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if w, ok := h.conn.(KeyWatcher); ok && len(b) == 8 && b[0] == msgKeyEvent {
		w.BeforeKey(binary.BigEndian.Uint32(b[4:]), b[1] != 0)
	}
	_, err := h.conn.Write(b)
	return err
}

// damage marks r changed on every client but those in the H.264 stream
// that get it as video (h264_hub.go: while the screen moves, or always
// with the Picture choice Fast), whose next frame it starts.
func (h *Hub) damage(r Rect) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	video := h.moving(r, now)
	for c := range h.clients {
		video = video || (h.wantsVideo(c) && c.enc.video == videoFast)
	}
	if video {
		h.videoChange(now)
	}
	for c := range h.clients {
		if !c.inStream || !h.videoOn(c) {
			c.addDamage(r)
		}
	}
}

// broadcast queues msg to every client, or with control only to those with
// control; an Extended Clipboard message only to clients that follow it.
func (h *Hub) broadcast(msg []byte, control, extended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if (control && !c.control) || (extended && !c.enc.extClip) {
			continue
		}
		c.queue(msg)
	}
}

// tellResize queues the screen's new layout to every client: to the one
// whose request the desktop answered, with its reason and status; to the
// others only when the layout took (reason 2, another client, or the
// desktop's own reason). Changed says the size changed: each client's
// whole screen is then painted again.
func (h *Hub) tellResize(reason, status int, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	asker := h.resizer
	if reason == 1 {
		h.resizer = nil
	}
	h.noteResize(asker, reason, status, changed)
}

// noteResize is tellResize's work for the answer to asker; hub.mu is held.
// A client takes no size from an answer that refused or passed on its
// request (status non-zero: noVNC), so a change not yet told goes after
// such an answer, in the same update, whichever came first: QEMU answers
// 4 at once and the guest sets its mode a moment later, before a loaded
// portal's writer had sent the answer (the e2e's VM head stayed at 640x480).
func (h *Hub) noteResize(asker *client, reason, status int, changed bool) {
	for c := range h.clients {
		untold := c.resize // not yet sent, and more than the layout
		if untold != nil && untold.layout {
			untold = nil
		}
		switch {
		case reason == 1 && c == asker:
			c.resize = &resizeNote{reason: 1, status: status}
			if status != 0 && untold != nil && untold.status == 0 {
				c.resize.then = untold
			}
		case status != 0:
			continue
		case reason == 1:
			c.resize = &resizeNote{reason: 2}
		case untold != nil && untold.status != 0:
			untold.then = &resizeNote{reason: reason}
		case untold != nil:
			// An answer not yet sent names the new layout too: it stays
			// (Xvnc follows its answer with a change of its own).
		default:
			c.resize = &resizeNote{reason: reason}
		}
		if changed {
			c.addDamage(Rect{0, 0, h.fb.w, h.fb.h})
		}
		c.wakeUp() // the note goes unasked, even where the damage was already there
	}
}

// hasLayout reports whether a SetDesktopSize message asks for the size
// and screens the desktop has now; hub.mu is held.
func (h *Hub) hasLayout(msg []byte) bool {
	w, hh := int(binary.BigEndian.Uint16(msg[2:])), int(binary.BigEndian.Uint16(msg[4:]))
	return w == h.fb.w && hh == h.fb.h && len(h.screens) >= 4 && msg[6] == h.screens[0] && bytes.Equal(msg[8:], h.screens[4:])
}
