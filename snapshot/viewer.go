package snapshot

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"sync"
)

// Viewer keeps a live picture of a desktop over one RFB connection (the
// desktop's shared screen, as a client of its hub) and sends input on it:
// what an agent sees and does. Every update that paints pixels makes a
// new generation of the picture, so that a caller can tell whether the
// screen changed without comparing pixels. Its methods are safe for
// concurrent use.
type Viewer struct {
	conn net.Conn
	wmu  sync.Mutex // writes

	mu      sync.Mutex
	img     *image.RGBA
	gen     uint64
	cut     string
	changed chan struct{} // closed and replaced on every new generation
	err     error
	done    chan struct{}
}

// ErrViewerClosed is why a viewer closed by Close ended.
var ErrViewerClosed = errors.New("snapshot: viewer closed")

// Watch shakes hands on conn (security type None, shared) and keeps the
// picture until conn ends or Close. It owns conn from then on.
func Watch(conn net.Conn) (*Viewer, error) {
	r := bufio.NewReaderSize(conn, 64<<10)
	w, h, err := handshake(r, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("snapshot: handshake: %w", err)
	}
	v := &Viewer{conn: conn, img: image.NewRGBA(image.Rect(0, 0, w, h)), changed: make(chan struct{}), done: make(chan struct{})}
	for _, msg := range [][]byte{setPF, setEncodings, update(false, v.img.Bounds())} {
		if err := v.send(msg); err != nil {
			conn.Close()
			return nil, err
		}
	}
	go func() { v.end(v.read(r)) }()
	return v, nil
}

var (
	setPF = []byte{0, 0, 0, 0,
		32, 24, 0, 1, // bpp, depth, little-endian, true colour
		0, 255, 0, 255, 0, 255, // max red, green, blue
		16, 8, 0, // shifts
		0, 0, 0}
	setRaw       = []byte{2, 0, 0, 1, 0, 0, 0, 0}                         // one encoding: raw (Take)
	setEncodings = []byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21} // raw and DesktopSize (-223): a Viewer follows size changes
)

// update is a FramebufferUpdateRequest for the whole of b, of its changes
// only where incremental.
func update(incremental bool, b image.Rectangle) []byte {
	inc := byte(0)
	if incremental {
		inc = 1
	}
	w, h := b.Dx(), b.Dy()
	return []byte{3, inc, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)}
}

func (v *Viewer) end(err error) {
	v.mu.Lock()
	if v.err == nil {
		v.err = err
		close(v.done)
	}
	v.mu.Unlock()
	v.conn.Close()
}

// Close ends the viewer and its connection.
func (v *Viewer) Close() error {
	v.end(ErrViewerClosed)
	return nil
}

// Done is closed when the viewer has ended; Err says why.
func (v *Viewer) Done() <-chan struct{} { return v.done }

// Err returns why the viewer ended, or nil while it runs.
func (v *Viewer) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// read paints updates and asks for the next changes, until an error. The
// desktop may change size (a console's window asking for its own, a
// screen window opened): the viewer follows it, as the DesktopSize
// pseudo-encoding it asked for says, with a new picture of the new size
// painted whole.
func (v *Viewer) read(r *bufio.Reader) error {
	next := update(true, v.img.Bounds())
	for {
		kind, err := r.ReadByte()
		if err != nil {
			return err
		}
		switch kind {
		case 0: // FramebufferUpdate
			v.mu.Lock()
			n, resized, err := covering(r, &v.img, true)
			if n > 0 {
				v.gen++
				close(v.changed)
				v.changed = make(chan struct{})
			}
			b := v.img.Bounds()
			v.mu.Unlock()
			if err != nil {
				return err
			}
			ask := next
			if resized {
				next, ask = update(true, b), update(false, b)
			}
			if err := v.send(ask); err != nil {
				return err
			}
		case 1: // SetColourMapEntries: not used with true colour
			var hdr struct {
				Pad      byte
				First, N uint16
			}
			if err := binary.Read(r, binary.BigEndian, &hdr); err != nil {
				return err
			}
			if _, err := r.Discard(int(hdr.N) * 6); err != nil {
				return err
			}
		case 2: // Bell
		case 3: // ServerCutText: the desktop's clipboard (Latin-1)
			var hdr struct {
				Pad [3]byte
				N   uint32
			}
			if err := binary.Read(r, binary.BigEndian, &hdr); err != nil {
				return err
			}
			if hdr.N > 1<<20 {
				return fmt.Errorf("snapshot: cut text of %d bytes", hdr.N)
			}
			buf := make([]byte, hdr.N)
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			v.mu.Lock()
			v.cut = latin1(buf)
			v.mu.Unlock()
		default:
			return fmt.Errorf("snapshot: unexpected server message %d", kind)
		}
	}
}

// Frame returns a copy of the picture and its generation (0 until the
// first update).
func (v *Viewer) Frame() (*image.RGBA, uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	img := image.NewRGBA(v.img.Bounds())
	copy(img.Pix, v.img.Pix)
	return img, v.gen
}

// Gen returns the picture's generation.
func (v *Viewer) Gen() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// Size returns the screen's size.
func (v *Viewer) Size() (w, h int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	b := v.img.Bounds()
	return b.Dx(), b.Dy()
}

// WaitChange waits until the picture's generation is past since and
// returns it; ctx ending returns the generation then, and ctx's error.
func (v *Viewer) WaitChange(ctx context.Context, since uint64) (uint64, error) {
	for {
		v.mu.Lock()
		gen, changed, err := v.gen, v.changed, v.err
		v.mu.Unlock()
		if gen > since {
			return gen, nil
		}
		if err != nil {
			return gen, err
		}
		select {
		case <-changed:
		case <-v.done:
		case <-ctx.Done():
			return gen, ctx.Err()
		}
	}
}

// CutText returns the desktop's clipboard as it last sent it.
func (v *Viewer) CutText() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cut
}

// Type presses and releases the key of each character of text in turn
// (Latin-1 keysyms are the characters' code points; "\b" is BackSpace),
// and returns the first error.
func (v *Viewer) Type(text string) error {
	for _, k := range text {
		sym := uint32(k)
		if k == '\b' {
			sym = 0xff08
		}
		if err := v.Key(sym, true); err != nil {
			return err
		}
		if err := v.Key(sym, false); err != nil {
			return err
		}
	}
	return nil
}

// Key presses (down) or releases a key by its X keysym.
func (v *Viewer) Key(keysym uint32, down bool) error {
	msg := []byte{4, 0, 0, 0, 0, 0, 0, 0}
	if down {
		msg[1] = 1
	}
	binary.BigEndian.PutUint32(msg[4:], keysym)
	return v.send(msg)
}

// Pointer moves the pointer to x, y with buttons (bit 0 left, 1 middle,
// 2 right, 3 and 4 the wheel) held.
func (v *Viewer) Pointer(x, y int, buttons byte) error {
	return v.send([]byte{5, buttons, byte(x >> 8), byte(x), byte(y >> 8), byte(y)})
}

// SetCutText puts text on the desktop's clipboard; characters beyond
// Latin-1 become '?', as RFB's plain cut text carries Latin-1 only.
func (v *Viewer) SetCutText(text string) error {
	var b []byte
	for _, r := range text {
		if r > 0xff {
			r = '?'
		}
		b = append(b, byte(r))
	}
	msg := make([]byte, 8, 8+len(b))
	msg[0] = 6
	binary.BigEndian.PutUint32(msg[4:], uint32(len(b)))
	return v.send(append(msg, b...))
}

func (v *Viewer) send(msg []byte) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	_, err := v.conn.Write(msg)
	return err
}

func latin1(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}
