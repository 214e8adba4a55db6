package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/snapshot"
)

// TestFromPNG: a screenshot is scaled to the thumbnail's width with its
// colours; what is not a PNG, and a PNG a hostile guest made huge, are
// refused before any pixel is decoded.
func TestFromPNG(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		src := image.NewNRGBA(image.Rect(0, 0, 640, 400))
		for i := range src.Pix {
			src.Pix[i] = []byte{0x2f, 0x3e, 0x4e, 0xff}[i%4]
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, src); err != nil {
			t.Fatal(err)
		}
		img, err := snapshot.FromPNG(buf.Bytes(), 320)
		if err != nil {
			t.Fatal(err)
		}
		if got := img.Bounds().Size(); got != image.Pt(320, 200) {
			t.Errorf("size %v; want 320x200", got)
		}
		if got := img.RGBAAt(5, 5); got != (color.RGBA{0x2f, 0x3e, 0x4e, 255}) {
			t.Errorf("pixel %v; want #2f3e4e", got)
		}
	})
	t.Run("ErrNotPNG", func(t *testing.T) {
		_, err := snapshot.FromPNG([]byte("P6\n640 400\n255\n"), 320)
		if err == nil || !strings.Contains(err.Error(), "not a PNG") {
			t.Errorf("FromPNG(PPM) = %v; want a not-a-PNG refusal", err)
		}
	})
	t.Run("ErrHuge", func(t *testing.T) {
		// Only the header of a 60000x60000 PNG: its size alone must refuse it.
		_, err := snapshot.FromPNG(pngHeader(60000, 60000), 320)
		if err == nil || !strings.Contains(err.Error(), "60000x60000") {
			t.Errorf("FromPNG(60000x60000) = %v; want a size refusal", err)
		}
	})
}

// pngHeader returns a PNG signature and IHDR chunk for a w×h RGBA image.
func pngHeader(w, h uint32) []byte {
	var ihdr bytes.Buffer
	ihdr.WriteString("IHDR")
	binary.Write(&ihdr, binary.BigEndian, w)
	binary.Write(&ihdr, binary.BigEndian, h)
	ihdr.Write([]byte{8, 6, 0, 0, 0})
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&out, binary.BigEndian, uint32(ihdr.Len()-4))
	out.Write(ihdr.Bytes())
	binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(ihdr.Bytes()))
	return out.Bytes()
}
