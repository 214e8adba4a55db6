package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"testing"
)

// oggPage writes one Ogg page of serial carrying segs (lacing values and
// their bytes); continued marks a page that goes on with a packet.
func oggPage(serial uint32, continued bool, packets ...[]byte) []byte {
	var lacing []byte
	var body []byte
	for _, p := range packets {
		body = append(body, p...)
		n := len(p)
		for n >= 255 {
			lacing = append(lacing, 255)
			n -= 255
		}
		lacing = append(lacing, byte(n))
	}
	h := make([]byte, 27)
	copy(h, "OggS")
	if continued {
		h[5] = 1
	}
	binary.LittleEndian.PutUint32(h[14:], serial)
	h[26] = byte(len(lacing))
	return append(append(h, lacing...), body...)
}

func TestOggPackets(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 600) // three lacing values: 255, 255, 90
	stream := append(oggPage(9, false, []byte("OpusHead"), []byte("OpusTags")), oggPage(9, false, []byte("a"), big, []byte{})...)
	// A packet split over two pages: 255 bytes end the first page's
	// lacing, so it goes on in the next, marked continued.
	first := oggPage(9, false, bytes.Repeat([]byte{1}, 255))
	first[26] = 1                             // only the 255: the packet is not finished on this page
	first = append(first[:28], first[29:]...) // without the closing 0
	stream = append(stream, first...)
	stream = append(stream, oggPage(9, true, []byte{2, 2})...)
	o := NewOggPackets(bytes.NewReader(stream))
	var got [][]byte
	for {
		p, err := o.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]byte(nil), p...))
	}
	want := [][]byte{[]byte("OpusHead"), []byte("OpusTags"), []byte("a"), big, {}, append(bytes.Repeat([]byte{1}, 255), 2, 2)}
	if len(got) != len(want) {
		t.Fatalf("got %d packets; want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("packet %d: %d bytes %v…%v; want %d", i, len(got[i]), got[i][:min(3, len(got[i]))], got[i][max(0, len(got[i])-3):], len(want[i]))
		}
	}
}

func TestOggPackets_Refusals(t *testing.T) {
	ok := oggPage(1, false, []byte("x"))
	for _, c := range []struct {
		name   string
		stream []byte
	}{
		{"not Ogg", []byte("RIFF....WAVEfmt ........................")},
		{"header cut short", ok[:10]},
		{"body cut short", ok[:len(ok)-1]},
		{"a second stream", append(append([]byte(nil), ok...), oggPage(2, false, []byte("y"))...)},
		{"continued without a start", oggPage(1, true, []byte("x"))[:28]},
		{"a packet over the bound", bytes.Repeat(func() []byte {
			p := oggPage(1, false, bytes.Repeat([]byte{0}, 255*255))
			p[26] = 255
			return p[:27+255+255*255]
		}(), 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := NewOggPackets(bytes.NewReader(c.stream))
			var err error
			for range 10 {
				if _, err = o.Next(); err != nil {
					break
				}
			}
			if err == nil || errors.Is(err, io.EOF) && c.name != "continued without a start" {
				t.Errorf("Next = %v; want an error", err)
			}
		})
	}
}

// TestOggPackets_GStreamer reads what the desktops' encoder writes: Ogg
// Opus from GStreamer's opusenc and oggmux.
func TestOggPackets_GStreamer(t *testing.T) {
	if _, err := exec.LookPath("gst-launch-1.0"); err != nil {
		t.Skip("gstreamer1.0-tools is not installed")
	}
	// Skip only where an element is missing; a pipeline that fails with
	// every element there is a failure to show.
	for _, el := range []string{"audiotestsrc", "opusenc", "oggmux", "fdsink"} {
		if exec.Command("gst-inspect-1.0", "--exists", el).Run() != nil {
			t.Skipf("no GStreamer element %s (gstreamer1.0-plugins-base)", el)
		}
	}
	cmd := exec.Command("gst-launch-1.0", "-q", "audiotestsrc", "num-buffers=50", "!", "audio/x-raw,rate=48000,channels=2", "!",
		"opusenc", "frame-size=20", "!", "oggmux", "max-delay=0", "max-page-delay=0", "!", "fdsink", "fd=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gst-launch-1.0 (Opus in Ogg): %v: %s", err, stderr.Bytes())
	}
	o := NewOggPackets(bytes.NewReader(out))
	var n int
	for ; ; n++ {
		p, err := o.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if n == 0 && !bytes.HasPrefix(p, []byte("OpusHead")) {
			t.Fatalf("first packet %q; want OpusHead", p)
		}
	}
	// 50 buffers of 1024 samples is about 1.07 s: some 53 packets of 20 ms.
	if n < 40 {
		t.Errorf("%d packets; want about 55", n)
	}
}

func FuzzOggPackets(f *testing.F) {
	f.Add(oggPage(1, false, []byte("OpusHead"), []byte("OpusTags"), []byte("a")))
	f.Add(oggPage(1, true, bytes.Repeat([]byte{1}, 300)))
	f.Fuzz(func(t *testing.T, b []byte) {
		o := NewOggPackets(bytes.NewReader(b))
		for range 1000 {
			p, err := o.Next()
			if err != nil {
				return
			}
			if len(p) > MaxOggPacket {
				t.Fatalf("a packet of %d bytes", len(p))
			}
		}
	})
}
