package relay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
)

// serverRecorder keeps the server bytes recorded.
type serverRecorder struct {
	mu  sync.Mutex
	out bytes.Buffer
	err error
}

func (r *serverRecorder) Output(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.out.Write(p)
	return nil
}
func (r *serverRecorder) Input([]byte) error  { return nil }
func (r *serverRecorder) Resize(Resize) error { return nil }

// TestVideoRecorder: access units a WebRTC track takes go into the
// recording's server stream between the desktop's messages, never inside
// one, however the reads split them: the recording is still a stream a
// client follows, with every frame in it, in order; the desktop's own
// bytes are all there, unchanged.
func TestVideoRecorder(t *testing.T) {
	client := new(rfbClient).handshake(1).pixelFormat32().Bytes()
	server := new(rfbServer).handshake().update().bell().update().cutText("hi").update().Bytes()
	for _, chunk := range []int{1, 7, 50, 4096} {
		conn := &fakeConn{r: bytes.NewReader(server), chunk: chunk}
		f := FilterRFBClipboard(conn, RFBClipboardConfig{ToDesktop: true, FromDesktop: true})
		if _, err := f.Write(client); err != nil {
			t.Fatal(err)
		}
		rec := new(serverRecorder)
		ctx, cancel := context.WithCancel(context.Background())
		v, err := RecordVideo(ctx, rec, f)
		if err != nil {
			t.Fatal(err)
		}
		var aus [][]byte
		buf := make([]byte, 64)
		for i := 0; ; i++ {
			au := []byte{0, 0, 0, 1, 0x65, byte(i)}
			if !v.Video(au, i == 0, 1280, 800) {
				t.Fatalf("chunk %d: frame %d refused", chunk, i)
			}
			aus = append(aus, au)
			n, err := f.Read(buf)
			if n > 0 {
				if err := v.Output(buf[:n]); err != nil {
					t.Fatal(err)
				}
			}
			if err == io.EOF {
				break
			}
		}
		v.wmu.Lock()
		v.flush() // the last frame, after the stream's end (a boundary)
		v.wmu.Unlock()
		cancel()
		got := rec.out.Bytes()

		// The recording, followed as a client would.
		g := FilterRFBClipboard(&fakeConn{r: bytes.NewReader(got), chunk: 4096}, RFBClipboardConfig{ToDesktop: true, FromDesktop: true})
		g.Write(client)
		if _, err := io.ReadAll(g); err != nil {
			t.Fatalf("chunk %d: the recording cannot be followed: %v", chunk, err)
		}
		// Taking the recorded frames out leaves the desktop's stream.
		var seen [][]byte
		rest := got
		var desktop []byte
		for {
			i := bytes.Index(rest, []byte{0, 0, 0, 1, 0, 0, 0, 0, 5, 0, 3, 32, 0, 0, 0, 50})
			if i < 0 {
				desktop = append(desktop, rest...)
				break
			}
			desktop = append(desktop, rest[:i]...)
			m := rest[i+16:]
			n := binary.BigEndian.Uint32(m)
			seen = append(seen, m[8:8+n])
			if flags := binary.BigEndian.Uint32(m[4:]); (flags == 1) != (len(seen) == 1) {
				t.Errorf("chunk %d: frame %d has flags %d; want the reset flag on the key frame only", chunk, len(seen), flags)
			}
			rest = m[8+n:]
		}
		if !bytes.Equal(desktop, server) {
			t.Errorf("chunk %d: the desktop's bytes in the recording differ from its stream", chunk)
		}
		if len(seen) != len(aus) {
			t.Fatalf("chunk %d: %d frames recorded; want %d", chunk, len(seen), len(aus))
		}
		for i := range aus {
			if !bytes.Equal(seen[i], aus[i]) {
				t.Errorf("chunk %d: frame %d recorded as %x; want %x", chunk, i, seen[i], aus[i])
			}
		}
	}
}

// TestVideoRecorder_Bounds: frames wait at most maxVideoRecordQueue for
// the stream's next boundary, and none are taken after the recording
// failed.
func TestVideoRecorder_Bounds(t *testing.T) {
	client := new(rfbClient).handshake(1).pixelFormat32().Bytes()
	server := new(rfbServer).handshake().Bytes()
	server = append(server, rfbFramebufferUpdate) // a message begun, not ended
	conn := &fakeConn{r: bytes.NewReader(server), chunk: 4096}
	f := FilterRFBClipboard(conn, RFBClipboardConfig{})
	f.Write(client)
	rec := new(serverRecorder)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := RecordVideo(ctx, rec, f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	if err := v.Output(b); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, maxVideoRecordQueue/4)
	taken := 0
	for range 8 {
		if v.Video(big, false, 8, 8) {
			taken++
		}
	}
	if taken != 3 {
		t.Errorf("%d frames of %d bytes taken inside a message; want 3 (the bound)", taken, len(big))
	}
	if rec.out.Len() != len(b) {
		t.Errorf("%d bytes recorded; want the desktop's %d (no frame inside its message)", rec.out.Len(), len(b))
	}
	rec.mu.Lock()
	rec.err = errors.New("disk full")
	rec.mu.Unlock()
	if err := v.Output([]byte{0}); err == nil {
		t.Error("Output after the recording failed: no error")
	}
	if v.Video([]byte{1}, true, 8, 8) {
		t.Error("a frame taken after the recording failed")
	}
}

// TestRecordVideo_NotFollowed: only a followed stream takes video.
func TestRecordVideo_NotFollowed(t *testing.T) {
	if _, err := RecordVideo(context.Background(), new(serverRecorder), &fakeConn{}); !errors.Is(err, ErrNotFollowed) {
		t.Errorf("RecordVideo on a bare conn: %v; want ErrNotFollowed", err)
	}
}
