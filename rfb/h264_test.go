package rfb

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mustGStreamer returns the encoder's program, or skips where GStreamer's
// x264enc is missing (scripts/deps.sh installs it).
func mustGStreamer(t *testing.T) string {
	t.Helper()
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	return "gst-launch-1.0"
}

// mustEncoder starts an encoder of program (default GStreamer's) for a
// w×h screen at 30 screens a second, a sink's pace. (Told 60, x264 gives
// a stream's first key frame half the bits and refines the picture over
// the next frames, which then are not the small deltas that
// TestEncoder_KeyFrameThenDeltas looks for.)
func mustEncoder(t *testing.T, w, h int, program ...string) *encoder {
	t.Helper()
	p := mustGStreamer(t)
	if len(program) > 0 {
		p = program[0]
	}
	e, err := startEncoder(context.Background(), p, w, h, int(time.Second/sinkFrame))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close() })
	return e
}

// mustEncoderService serves encoders (ServeEncoders) on a Unix socket
// until t ends and returns its program for a hub, "unix:PATH".
func mustEncoderService(t *testing.T, max int) string {
	t.Helper()
	gst := mustGStreamer(t)
	path := filepath.Join(t.TempDir(), "h264.sock")
	ln, err := ListenEncoders(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeEncoders(ctx, ln, EncoderServiceConfig{Program: gst, Max: max}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeEncoders: %v", err)
		}
	})
	return "unix:" + path
}

// nalTypes lists the NAL unit types of an Annex-B access unit.
func nalTypes(t *testing.T, au []byte) []byte {
	t.Helper()
	nals, err := splitNALs(au)
	if err != nil {
		t.Fatal(err)
	}
	var types []byte
	for _, n := range nals {
		types = append(types, n[startCodeLen(n)]&0x1f)
	}
	return types
}

// screen returns a w×h screen of RGBX pixels: a gradient with a square
// at x.
func screen(w, h, x int) []byte {
	pix := make([]byte, w*h*4)
	for y := 0; y < h; y++ {
		for i := 0; i < w; i++ {
			p := pix[(y*w+i)*4:]
			p[0], p[1], p[2] = byte(i), byte(y), 128
			if i >= x && i < x+16 && y >= 8 && y < 24 {
				p[0], p[1], p[2] = 255, 255, 255
			}
		}
	}
	return pix
}

// TestEncoder_KeyFrameThenDeltas: the encoder's first access unit is a key
// frame with its SPS and PPS in front, as noVNC needs to configure its
// decoder; the next are single P slices, small when little moved; no
// access unit delimiters reach a viewer. The same from the encoder
// service (the Kubernetes encoder sidecar's).
func TestEncoder_KeyFrameThenDeltas(t *testing.T) {
	service := mustEncoderService(t, 0)
	for _, tc := range []struct {
		program []string
		size    [2]int
	}{{nil, [2]int{320, 200}}, {nil, [2]int{321, 199}}, {[]string{service}, [2]int{321, 199}}} {
		size := tc.size
		e := mustEncoder(t, size[0], size[1], tc.program...)
		first, err := e.encode(screen(size[0], size[1], 0))
		if err != nil {
			t.Fatal(err)
		}
		if types := nalTypes(t, first.data); !first.key || !bytes.Contains(types, []byte{nalSPS}) || !bytes.Contains(types, []byte{nalPPS}) || types[len(types)-1] != nalIDR {
			t.Fatalf("%dx%d: first access unit has NAL types %v (key %v); want SPS, PPS, then an IDR", size[0], size[1], types, first.key)
		}
		for i := 1; i <= 5; i++ {
			au, err := e.encode(screen(size[0], size[1], i*4))
			if err != nil {
				t.Fatal(err)
			}
			types := nalTypes(t, au.data)
			if au.key || types[len(types)-1] != nalSlice || bytes.Contains(types, []byte{nalAUD}) {
				t.Fatalf("%dx%d: frame %d has NAL types %v (key %v); want one P slice last and no delimiter", size[0], size[1], i, types, au.key)
			}
			if len(au.data) >= len(first.data) {
				t.Errorf("%dx%d: frame %d, a 16-pixel square moved, is %d bytes; the key frame %d", size[0], size[1], i, len(au.data), len(first.data))
			}
		}
	}
}

// TestEncoder_WrongSize: a screen that is not the encoder's size is an
// error, not a crash or a garbled stream.
func TestEncoder_WrongSize(t *testing.T) {
	e := mustEncoder(t, 64, 48)
	if _, err := e.encode(make([]byte, 10)); err == nil {
		t.Fatal("a 10-byte screen for a 64x48 encoder was taken")
	}
}

// TestEncoder_Hangs: an encoder that takes a screen and never answers
// (or never takes it: a screen larger than the pipe) is stopped after
// encodeTimeout with an error that says so, rather than holding the
// hub's stream for good.
func TestEncoder_Hangs(t *testing.T) {
	defer func(d time.Duration) { encodeTimeout = d }(encodeTimeout)
	encodeTimeout = 300 * time.Millisecond
	hang := filepath.Join(t.TempDir(), "hang")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, size := range [][2]int{{64, 48}, {640, 480}} { // within the pipe's 64 KiB, and past it
		e, err := startEncoder(context.Background(), hang, size[0], size[1], maxEncoderFPS)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.encode(screen(size[0], size[1], 0))
		if err == nil || !strings.Contains(err.Error(), "no access unit within 300ms") {
			t.Errorf("%dx%d: an encoder that never answers: %v; want it stopped after 300ms", size[0], size[1], err)
		}
		e.close()
	}
}

// TestAnnexB_Check: the rules an access unit must keep before it reaches
// a viewer.
func TestAnnexB_Check(t *testing.T) {
	sc := []byte{0, 0, 0, 1}
	nal := func(typ byte, body ...byte) []byte { return append(append(append([]byte{}, sc...), typ), body...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	sps, pps, idr, p, sei, aud := nal(0x67, 0x42, 0xc0, 0x1f), nal(0x68, 0xce), nal(0x65, 0x88), nal(0x41, 0x9a), nal(0x06, 0x05), nal(0x09, 0xf0)
	var a annexB
	if _, err := a.check(idr); err == nil {
		t.Error("a key frame before any SPS and PPS was taken")
	}
	au, err := a.check(cat(aud, sps, pps, sei, idr))
	if err != nil || !au.key || !bytes.Equal(au.data, cat(sps, pps, sei, idr)) {
		t.Errorf("check(AUD SPS PPS SEI IDR) = %x, %v, %v; want it without the AUD, a key frame", au.data, au.key, err)
	}
	au, err = a.check(idr)
	if err != nil || !bytes.Equal(au.data, cat(sps, pps, idr)) {
		t.Errorf("check(IDR) = %x, %v; want the last SPS and PPS in front", au.data, err)
	}
	if au, err = a.check(cat([]byte{0, 0, 1, 0x41, 1}, nil)); err != nil || au.key {
		t.Errorf("a P slice behind a 3-byte start code: %v, key %v", err, au.key)
	}
	for name, bad := range map[string][]byte{
		"no start code":     {0x41, 0x9a},
		"two slices":        cat(p, p),
		"no slice":          cat(sps, pps),
		"slice not last":    cat(p, sei),
		"forbidden bit":     nal(0xc1, 1),
		"empty unit":        cat(sc, p),
		"unknown unit type": cat(nal(0x0e, 1), p),
		"too long":          append(p, make([]byte, maxAccessUnit)...),
	} {
		if _, err := a.check(bad); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}

// FuzzAnnexB: whatever an encoder or a desktop feeds the checker, it
// returns an error or an access unit that keeps the rules, never panics.
func FuzzAnnexB(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0x67, 0x42, 0, 0, 1, 0x68, 0xce, 0, 0, 0, 1, 0x65, 0x88})
	f.Add([]byte{0, 0, 1, 0x41, 0x9a, 0, 0, 0, 1, 0x09})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a annexB
		for range 2 {
			au, err := a.check(b)
			if err != nil {
				continue
			}
			types := nalTypes(t, au.data)
			last := types[len(types)-1]
			if last != nalSlice && last != nalIDR || bytes.Contains(types, []byte{nalAUD}) {
				t.Fatalf("check(%x) = %x with NAL types %v", b, au.data, types)
			}
			if au.key && (!bytes.Contains(types, []byte{nalSPS}) || !bytes.Contains(types, []byte{nalPPS})) {
				t.Fatalf("key frame %x without its SPS and PPS", au.data)
			}
		}
	})
}

// TestEncoderService_Refuses: the encoder service runs its own pipeline at
// a size and a rate it checks, and no more encoders than it allows: a
// first line that is not the hello (or is version 1's, with no rate), an
// odd or too large size, a rate outside 1 to 60, and an encoder beyond
// the limit are closed unanswered, and the hub's error says the stream
// ended.
func TestEncoderService_Refuses(t *testing.T) {
	service := mustEncoderService(t, 1)
	path := strings.TrimPrefix(service, "unix:")
	for _, hello := range []string{"GET / HTTP/1.1\r\n", "corral-h264 2 321 200 60\n", "corral-h264 2 20000 200 60\n", "corral-h264 2 -4 200 60\n", "corral-h264 2 320 200 60 -e\n",
		"corral-h264 2 320 200 0\n", "corral-h264 2 320 200 61\n", "corral-h264 1 320 200\n"} {
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(hello))
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		// Closed: at its end, or reset when the line was left unread.
		if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil || os.IsTimeout(err) {
			t.Errorf("first line %q: read %d bytes, %v; want the connection closed", hello, n, err)
		}
		conn.Close()
	}
	first := mustEncoder(t, 64, 48, service)
	if _, err := first.encode(make([]byte, 64*48*4)); err != nil {
		t.Fatal(err)
	}
	// Beyond Max: 1. The service closes it unanswered, which its start
	// (writing the hello into a connection closed meanwhile: EPIPE) or its
	// first frame finds.
	second, err := startEncoder(context.Background(), service, 64, 48, maxEncoderFPS)
	if err == nil {
		_, err = second.encode(make([]byte, 64*48*4))
		second.close()
	}
	if err == nil {
		t.Error("a second encoder at once from a service that allows one; want an error")
	}
	first.close()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if CheckH264(context.Background(), service) == nil {
			break // its slot was given back
		}
		if time.Now().After(end) {
			t.Fatal("the service took no encoder after the first one ended")
		}
	}
}

// BenchmarkEncoder_1280x800 encodes a moving square on a 1280×800 screen
// by a process of the hub's own and by the encoder service (the
// Kubernetes encoder sidecar's), frame after frame: the socket's cost
// against the pipes'.
func BenchmarkEncoder_1280x800(b *testing.B) {
	const w, h = 1280, 800
	gst := "gst-launch-1.0"
	if exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run() != nil {
		b.Skip("no GStreamer x264enc")
	}
	path := filepath.Join(b.TempDir(), "h264.sock")
	ln, err := ListenEncoders(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeEncoders(ctx, ln, EncoderServiceConfig{Program: gst})
	screens := [][]byte{screen(w, h, 0), screen(w, h, 64)}
	for _, program := range []string{gst, "unix:" + path} {
		name := "Process"
		if program != gst {
			name = "Service"
		}
		b.Run(name, func(b *testing.B) {
			e, err := startEncoder(context.Background(), program, w, h, maxEncoderFPS)
			if err != nil {
				b.Fatal(err)
			}
			defer e.close()
			var bytes int
			for i := 0; b.Loop(); i++ {
				au, err := e.encode(screens[i%2])
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(au.data)
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/frame")
		})
	}
}
