// Package snapshot takes a still picture of a desktop over VNC: a minimal
// RFB 3.8 client that asks for one full frame in raw encoding and scales
// it down to a PNG thumbnail. It knows bytes and pixels, not users.
package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"time"
)

// maxFrame bounds each side of the framebuffer a server may announce, and
// maxPixels its area (a 4096×2304 screen, 36 MiB as RGBA): a hostile
// desktop announcing 8192×8192 would make every thumbnail 256 MiB.
const (
	maxFrame  = 8192
	maxPixels = 4096 * 2304
)

// encDesktopSize is RFB's DesktopSize pseudo-encoding: a rectangle whose
// size is the screen's new size, with no pixels.
const encDesktopSize = -223

// plausible refuses a screen size no desktop has (maxFrame, maxPixels).
func plausible(w, h uint16) error {
	if w == 0 || h == 0 || w > maxFrame || h > maxFrame || int(w)*int(h) > maxPixels {
		return fmt.Errorf("implausible screen %dx%d", w, h)
	}
	return nil
}

// Take reads one frame from an RFB server on conn (no authentication, the
// portal's own socket) and returns it scaled to at most width pixels wide.
// It closes nothing: the caller owns conn. The deadline bounds the whole
// exchange.
func Take(conn net.Conn, width int, deadline time.Time) (*image.RGBA, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	w, h, err := handshake(r, conn)
	if err != nil {
		return nil, fmt.Errorf("snapshot: handshake: %w", err)
	}
	frame, err := readFrame(r, conn, w, h)
	if err != nil {
		return nil, fmt.Errorf("snapshot: frame: %w", err)
	}
	return Scale(frame, width), nil
}

// handshake negotiates RFB 3.8 with security type None and a shared
// session (other viewers stay connected), and returns the screen size.
func handshake(r *bufio.Reader, w io.Writer) (width, height int, err error) {
	version := make([]byte, 12)
	if _, err := io.ReadFull(r, version); err != nil {
		return 0, 0, err
	}
	if string(version[:4]) != "RFB " {
		return 0, 0, fmt.Errorf("not an RFB server: %q", version)
	}
	if _, err := w.Write([]byte("RFB 003.008\n")); err != nil {
		return 0, 0, err
	}
	n, err := r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, errors.New("server refused: " + readReason(r))
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(r, types); err != nil {
		return 0, 0, err
	}
	hasNone := false
	for _, t := range types {
		hasNone = hasNone || t == 1
	}
	if !hasNone {
		return 0, 0, fmt.Errorf("server wants authentication (security types %v); snapshots need type None", types)
	}
	if _, err := w.Write([]byte{1}); err != nil {
		return 0, 0, err
	}
	var result uint32
	if err := binary.Read(r, binary.BigEndian, &result); err != nil {
		return 0, 0, err
	}
	if result != 0 {
		return 0, 0, errors.New("security failed: " + readReason(r))
	}
	if _, err := w.Write([]byte{1}); err != nil { // ClientInit: shared
		return 0, 0, err
	}
	var init struct {
		Width, Height uint16
		PixelFormat   [16]byte
		NameLen       uint32
	}
	if err := binary.Read(r, binary.BigEndian, &init); err != nil {
		return 0, 0, err
	}
	if _, err := r.Discard(int(min(init.NameLen, 1<<16))); err != nil {
		return 0, 0, err
	}
	if err := plausible(init.Width, init.Height); err != nil {
		return 0, 0, err
	}
	return int(init.Width), int(init.Height), nil
}

func readReason(r *bufio.Reader) string {
	var n uint32
	if binary.Read(r, binary.BigEndian, &n) != nil {
		return "no reason given"
	}
	buf := make([]byte, min(n, 1024))
	io.ReadFull(r, buf)
	return string(buf)
}

// readFrame asks for 32-bit true colour in raw encoding, requests the
// whole screen and paints rectangles until every pixel has been covered
// once (the first update to a full request normally holds all of it).
func readFrame(r *bufio.Reader, w io.Writer, width, height int) (*image.RGBA, error) {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for _, msg := range [][]byte{setPF, setRaw, update(false, img.Bounds())} {
		if _, err := w.Write(msg); err != nil {
			return nil, err
		}
	}
	covered := 0
	for covered < width*height {
		kind, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		switch kind {
		case 0: // FramebufferUpdate
			n, _, err := covering(r, &img, false)
			if err != nil {
				return nil, err
			}
			covered += n
		case 1: // SetColourMapEntries: not used with true colour, skip
			var hdr struct {
				Pad   byte
				First uint16
				N     uint16
			}
			if err := binary.Read(r, binary.BigEndian, &hdr); err != nil {
				return nil, err
			}
			if _, err := r.Discard(int(hdr.N) * 6); err != nil {
				return nil, err
			}
		case 2: // Bell
		case 3: // ServerCutText
			var hdr struct {
				Pad [3]byte
				N   uint32
			}
			if err := binary.Read(r, binary.BigEndian, &hdr); err != nil {
				return nil, err
			}
			if _, err := r.Discard(int(min(hdr.N, 1<<24))); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unexpected server message %d", kind)
		}
	}
	return img, nil
}

// covering reads one FramebufferUpdate's rectangles into *img and returns
// how many pixels they painted. A client that follows size changes
// (follow; it asked for the DesktopSize pseudo-encoding) gets a new,
// blank *img of the new size at a DesktopSize rectangle, and resized
// true; one that does not refuses it, as any encoding it did not ask for.
func covering(r *bufio.Reader, imgp **image.RGBA, follow bool) (painted int, resized bool, err error) {
	img := *imgp
	var hdr struct {
		Pad   byte
		Rects uint16
	}
	if err := binary.Read(r, binary.BigEndian, &hdr); err != nil {
		return 0, false, err
	}
	bounds := img.Bounds()
	for range hdr.Rects {
		var rect struct {
			X, Y, W, H uint16
			Encoding   int32
		}
		if err := binary.Read(r, binary.BigEndian, &rect); err != nil {
			return 0, false, err
		}
		if rect.Encoding == encDesktopSize && follow {
			if err := plausible(rect.W, rect.H); err != nil {
				return 0, false, err
			}
			img = image.NewRGBA(image.Rect(0, 0, int(rect.W), int(rect.H)))
			*imgp, bounds, resized = img, img.Bounds(), true
			continue
		}
		if rect.Encoding != 0 {
			return 0, false, fmt.Errorf("server sent encoding %d; only raw was asked for", rect.Encoding)
		}
		box := image.Rect(int(rect.X), int(rect.Y), int(rect.X)+int(rect.W), int(rect.Y)+int(rect.H))
		if !box.In(bounds) {
			return 0, false, fmt.Errorf("rectangle %v outside the screen %v", box, bounds)
		}
		row := make([]byte, int(rect.W)*4)
		for y := box.Min.Y; y < box.Max.Y; y++ {
			if _, err := io.ReadFull(r, row); err != nil {
				return 0, false, err
			}
			off := img.PixOffset(box.Min.X, y)
			for x := 0; x < int(rect.W); x++ {
				px := binary.LittleEndian.Uint32(row[x*4:])
				img.Pix[off+x*4+0] = byte(px >> 16)
				img.Pix[off+x*4+1] = byte(px >> 8)
				img.Pix[off+x*4+2] = byte(px)
				img.Pix[off+x*4+3] = 255
			}
		}
		painted += box.Dx() * box.Dy()
	}
	return painted, resized, nil
}

// Scale returns src shrunk to at most width pixels wide, keeping its aspect
// ratio, by averaging each destination pixel's source box. A source no
// wider than width is returned as it is. src may be a part of a larger
// picture (SubImage); the result starts at 0,0.
func Scale(src *image.RGBA, width int) *image.RGBA {
	min0 := src.Bounds().Min
	sw, sh := src.Bounds().Dx(), src.Bounds().Dy()
	if width <= 0 || sw <= width {
		return src
	}
	dh := max(sh*width/sw, 1)
	dst := image.NewRGBA(image.Rect(0, 0, width, dh))
	for y := range dh {
		y0, y1 := y*sh/dh, max((y+1)*sh/dh, y*sh/dh+1)
		for x := range width {
			x0, x1 := x*sw/width, max((x+1)*sw/width, x*sw/width+1)
			var sum [3]int
			for sy := y0; sy < y1; sy++ {
				off := src.PixOffset(min0.X+x0, min0.Y+sy)
				for sx := x0; sx < x1; sx++ {
					sum[0] += int(src.Pix[off])
					sum[1] += int(src.Pix[off+1])
					sum[2] += int(src.Pix[off+2])
					off += 4
				}
			}
			n := (y1 - y0) * (x1 - x0)
			o := dst.PixOffset(x, y)
			dst.Pix[o], dst.Pix[o+1], dst.Pix[o+2], dst.Pix[o+3] = byte(sum[0]/n), byte(sum[1]/n), byte(sum[2]/n), 255
		}
	}
	return dst
}

// PNG encodes img with fast compression.
func PNG(w io.Writer, img image.Image) error {
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	return enc.Encode(w, img)
}
