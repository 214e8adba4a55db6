package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// The RFB clipboard filter enforces a pool's clipboard policy on a VNC
// console: it follows both directions of the stream and drops
// ClientCutText (browser to desktop) or ServerCutText (desktop to browser),
// classic or in the Extended Clipboard format, as the policy says. It also
// bounds what it lets through: a classic cut text longer than MaxText is
// cut to MaxText, an extended one (zlib, not cuttable) is dropped, and
// beyond a burst only a few cut texts a second pass each way. After a flood
// of Extended Clipboard notifies the client is told of the desktop's last
// clipboard once the desktop is quiet, so the flood does not leave it with
// a stale one.
//
// To follow the desktop's framebuffer updates it must know every encoding
// in them, so it rewrites the client's SetEncodings to the ones it can
// follow (Raw, CopyRect, Tight, ZRLE, Open H.264 and the pseudo-encodings noVNC uses
// with TigerVNC and QEMU). A stream it cannot follow (RFB 3.3, a security
// type such as TLS, an encoding it did not allow) ends the console: the
// policy is never left unenforced.

// RFBClipboardConfig configures FilterRFBClipboard.
type RFBClipboardConfig struct {
	// ToDesktop and FromDesktop say which way cut text may go.
	ToDesktop, FromDesktop bool
	// MaxText is the longest cut text let through, in bytes; zero means
	// DefaultMaxCutText.
	MaxText int
	// OnDrop, if set, hears of dropped or cut clipboard messages: at once
	// for the first, then at most once a second with a count, and at Close
	// for the rest. It is called from the relay's goroutines.
	OnDrop func(ClipboardDrop)
	// Now is the clock for the flood limit; nil means time.Now.
	Now func() time.Time
}

// filterBufferSize is the filter's read buffer, held for the console's
// life.
const filterBufferSize = 32 << 10

// notifyCheck is how often, after a flood, the filter looks for a quiet
// moment to tell the client the desktop's clipboard changed.
const notifyCheck = 250 * time.Millisecond

// DefaultMaxCutText is the longest clipboard text a VNC console carries by
// default.
const DefaultMaxCutText = 256 << 10

// Flood limit: cut texts allowed each way in a burst, and refilled a second.
const (
	cutTextBurst  = 20
	cutTextPerSec = 5
)

// ClipboardDrop reports clipboard messages the filter dropped or cut.
type ClipboardDrop struct {
	// Direction is "to-desktop" or "from-desktop".
	Direction string
	// Reason is "policy", "too large" (cut or dropped), "flood" or
	// "malformed".
	Reason string
	// Count is how many messages since the last report; Bytes their
	// payload bytes.
	Count int
	Bytes int64
}

// Extended Clipboard (the pseudo-encoding 0xC0A1E5CE): a cut text with a
// negative length whose payload starts with flags; these actions carry
// the clipboard's content or news of it.
const (
	extendedClipboard = -1063131698 // 0xC0A1E5CE as an int32
	extRequest        = 1 << 25
	extNotify         = 1 << 27
	extProvide        = 1 << 28
)

// FilterRFBClipboard returns conn with the clipboard policy cfg applied to
// the RFB stream: Write carries the client's messages to the desktop, Read
// the desktop's to the client. Each of Read and Write must be called from
// one goroutine at a time, as Pipe does.
func FilterRFBClipboard(conn net.Conn, cfg RFBClipboardConfig) net.Conn {
	if cfg.MaxText <= 0 {
		cfg.MaxText = DefaultMaxCutText
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &rfbFilter{Conn: conn, cfg: cfg, rbuf: make([]byte, filterBufferSize)}
	switch conn.(type) {
	case *net.UnixConn, *net.TCPConn: // a read that times out leaves them usable
	default:
		// The screen hub's net.Pipe does too; a websocket would end.
		f.noDeadline = reflect.TypeOf(underneath(conn)) != pipeType
	}
	f.up.dir, f.down.dir = "to-desktop", "from-desktop"
	f.up.allow, f.down.allow = cfg.ToDesktop, cfg.FromDesktop
	f.up.stream.next(12, f.clientVersion)
	f.down.stream.next(12, f.serverVersion)
	return f
}

// pipeType is net.Pipe's conn, what the screen hub serves its clients on
// (a VNC console's stream is always the hub's).
var pipeType = func() reflect.Type {
	a, b := net.Pipe()
	a.Close()
	b.Close()
	return reflect.TypeOf(a)
}()

// underneath returns the connection a hub client's conn wraps (it has a
// NetConn method, as rfb's has), else conn.
func underneath(conn net.Conn) net.Conn {
	if w, ok := conn.(interface{ NetConn() net.Conn }); ok {
		return w.NetConn()
	}
	return conn
}

// rfbFilter is the filtering conn.
type rfbFilter struct {
	net.Conn
	cfg      RFBClipboardConfig
	up, down rfbDirection
	rbuf     []byte
	pending  []byte // filtered desktop bytes not yet read
	// mu guards what one direction learns and the other needs.
	mu       sync.Mutex
	minor    int      // the client's RFB minor version
	security byte     // the security type the client chose
	offered  byte     // the only security type the server offered, if one
	pf       rfbPixel // the pixel format of framebuffer updates
	// The current update, as the desktop side follows it.
	rects        int // rectangles left
	rectW, rectH int64
	closeOnce    sync.Once
	reportedMu   sync.Mutex // guards the directions' drop counts and reports
	// latest holds the formats of Extended Clipboard notifies dropped in a
	// flood, so that the client hears of the desktop's last clipboard once
	// the flood is over (notifyLatest); zero when it is up to date.
	latest     uint32
	noDeadline bool // the desktop conn cannot time a read out harmlessly
	// floodNotifies counts the desktop's notifies dropped in a flood, and
	// askedAt holds that count when the client's last request passed: a
	// provide brings the latest content only if none was dropped since, as
	// a desktop's answer can carry the clipboard it had when it was asked
	// (an X selection is fetched from its owner while newer ones announce
	// themselves).
	floodNotifies, askedAt atomic.Uint64
}

// rfbDirection is one direction's parse state and clipboard accounting.
type rfbDirection struct {
	stream  rfbStream
	dir     string
	allow   bool
	tokens  float64
	refill  time.Time
	dropped map[string]*ClipboardDrop
	last    time.Time
}

// rfbPixel is the part of a pixel format the filter needs.
type rfbPixel struct {
	bpp   int  // bytes per pixel
	tight int  // bytes per Tight TPIXEL
	valid bool // a pixel format was seen
}

func errRFB(format string, args ...any) error {
	return fmt.Errorf("relay: rfb clipboard filter cannot follow %s", fmt.Sprintf(format, args...))
}

// Write filters the client's bytes and writes what passes to the desktop.
func (f *rfbFilter) Write(p []byte) (int, error) {
	out, err := f.up.stream.feed(p)
	if err != nil {
		return 0, err
	}
	if len(out) > 0 {
		if _, err := f.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Read reads from the desktop and returns what passes the filter.
func (f *rfbFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		waiting := f.latest != 0 && !f.noDeadline
		if waiting && f.Conn.SetReadDeadline(time.Now().Add(notifyCheck)) != nil {
			f.noDeadline, waiting = true, false
		}
		n, err := f.Conn.Read(f.rbuf)
		if waiting {
			f.Conn.SetReadDeadline(time.Time{})
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				f.notifyLatest()
				continue
			}
		}
		if n > 0 {
			out, ferr := f.down.stream.feed(f.rbuf[:n])
			if ferr != nil {
				return 0, ferr
			}
			f.pending = out
			if f.latest != 0 { // a busy desktop may never be quiet
				f.notifyLatest()
			}
		}
		if err != nil && len(f.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break // return what we have; the error comes back on the next Read
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// notifyLatest tells the client, at a message boundary and within the
// flood limit, that the desktop's clipboard changed: a Notify of the
// formats whose notifies the flood dropped, which the client answers with
// a request for the content, as it would have.
func (f *rfbFilter) notifyLatest() {
	s := &f.down.stream
	// Two tokens: one for this notify, one for the content it brings.
	if !s.boundary || len(s.spans) > 0 || len(s.hdr) > 0 || !f.take(&f.down) {
		return
	}
	if f.down.tokens < 1 {
		f.down.tokens++ // not yet: give it back
		return
	}
	msg := []byte{rfbServerCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[8:], extNotify|f.latest)
	f.pending = append(f.pending, msg...)
	f.latest = 0
}

// Close reports the drops not yet reported and closes the desktop conn.
func (f *rfbFilter) Close() error {
	f.closeOnce.Do(func() {
		f.report(&f.up, true)
		f.report(&f.down, true)
	})
	return f.Conn.Close()
}

// cutText decides on a cut text of n payload bytes (extended says it is
// in the Extended Clipboard format, with flags its actions): pass, cut to
// a length, or drop. It counts drops for the report.
func (f *rfbFilter) cutText(d *rfbDirection, n int64, extended bool, flags uint32) (keep int64, drop bool) {
	carries := !extended || flags&(extNotify|extProvide) != 0
	// From the desktop, an Extended Clipboard notify or provide lost to a
	// flood is announced again once the flood is over (notifyLatest).
	news := extended && flags&(extNotify|extProvide) != 0 && d == &f.down
	reason := ""
	switch {
	case !carries: // capabilities, requests, peeks: no content
		if extended && flags&extRequest != 0 && d == &f.up {
			f.askedAt.Store(f.floodNotifies.Load())
		}
		return n, false
	case !d.allow:
		reason = "policy"
	case !f.take(d):
		reason = "flood"
	case n > int64(f.cfg.MaxText) && extended:
		reason = "too large"
	case n > int64(f.cfg.MaxText):
		f.count(d, "too large", n-int64(f.cfg.MaxText))
		return int64(f.cfg.MaxText), false
	default:
		if news && flags&extProvide != 0 && f.askedAt.Load() == f.floodNotifies.Load() {
			f.latest = 0 // the client has the latest content
		}
		return n, false
	}
	if news && reason == "flood" {
		f.latest |= flags & 0xffff
		f.floodNotifies.Add(1)
	}
	f.count(d, reason, n)
	return 0, true
}

// take spends a flood-limit token of d, reporting whether one was left.
func (f *rfbFilter) take(d *rfbDirection) bool {
	now := f.cfg.Now()
	if d.refill.IsZero() {
		d.tokens, d.refill = cutTextBurst, now
	}
	d.tokens = min(cutTextBurst, d.tokens+now.Sub(d.refill).Seconds()*cutTextPerSec)
	d.refill = now
	if d.tokens < 1 {
		return false
	}
	d.tokens--
	return true
}

// count notes a dropped (or cut) message and reports when it is time.
func (f *rfbFilter) count(d *rfbDirection, reason string, bytes int64) {
	f.reportedMu.Lock()
	if d.dropped == nil {
		d.dropped = map[string]*ClipboardDrop{}
	}
	c := d.dropped[reason]
	if c == nil {
		c = &ClipboardDrop{Direction: d.dir, Reason: reason}
		d.dropped[reason] = c
	}
	c.Count++
	c.Bytes += bytes
	f.reportedMu.Unlock()
	f.report(d, false)
}

// report hands d's counted drops to OnDrop: the first at once, then at
// most once a second, and all of them when final.
func (f *rfbFilter) report(d *rfbDirection, final bool) {
	f.reportedMu.Lock()
	now := f.cfg.Now()
	var out []ClipboardDrop
	if final || now.Sub(d.last) >= time.Second {
		for k, c := range d.dropped {
			out = append(out, *c)
			delete(d.dropped, k)
		}
		if len(out) > 0 {
			d.last = now
		}
	}
	f.reportedMu.Unlock()
	if f.cfg.OnDrop != nil {
		for _, c := range out {
			f.cfg.OnDrop(c)
		}
	}
}

// cutTextHeader handles the 8-byte header of a cut text message (client
// or server: type, 3 padding, length) on stream s of direction d; for the
// Extended Clipboard format it first collects the 4-byte flags.
func (f *rfbFilter) cutTextHeader(d *rfbDirection, then func() error) func(h []byte) error {
	s := &d.stream
	return func(h []byte) error {
		length := int64(int32(binary.BigEndian.Uint32(h[4:8])))
		if length >= 0 {
			keep, drop := f.cutText(d, length, false, 0)
			if !drop {
				out := append([]byte(nil), h[:8]...)
				binary.BigEndian.PutUint32(out[4:8], uint32(keep))
				s.emit(out)
			}
			s.skip(keep, drop)
			s.skip(length-keep, true)
			return then()
		}
		n := -length
		if n < 4 { // no room for the flags: nothing a peer can use
			f.count(d, "malformed", n)
			s.skip(n, true)
			return then()
		}
		return s.more(12, func(h []byte) error {
			_, drop := f.cutText(d, n, true, binary.BigEndian.Uint32(h[8:12]))
			if !drop {
				s.emit(h)
			}
			s.skip(n-4, drop)
			return then()
		})
	}
}
