package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestDesktop_ClipboardImage sets and reads a real Xvnc desktop's
// clipboard picture with xclip, as a program in it would see it.
func TestDesktop_ClipboardImage(t *testing.T) {
	d := MustStartDesktop(t, MustDesktopSpec(t, "clip"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	img.Set(3, 4, color.RGBA{200, 10, 30, 255})
	var pic bytes.Buffer
	must(t, png.Encode(&pic, img))
	code := func(err error) vdi.Code {
		var e *vdi.Error
		if errors.As(err, &e) {
			return e.Code
		}
		return ""
	}

	t.Run("NoPicture", func(t *testing.T) {
		if _, err := d.ClipboardImage(ctx, 1<<20); code(err) != vdi.ENotFound {
			t.Errorf("an empty clipboard: %v; want not found", err)
		}
	})
	t.Run("BrowserToDesktop", func(t *testing.T) {
		must(t, d.SetClipboardImage(ctx, pic.Bytes()))
		var got bytes.Buffer
		must(t, d.runX(ctx, nil, &got, "xclip", "-selection", "clipboard", "-t", "image/png", "-o"))
		if !bytes.Equal(got.Bytes(), pic.Bytes()) {
			t.Errorf("xclip reads %d bytes; want the %d set", got.Len(), pic.Len())
		}
	})
	t.Run("DesktopToBrowser", func(t *testing.T) {
		img.Set(5, 6, color.RGBA{10, 200, 30, 255}) // not the picture set before
		var pic bytes.Buffer
		must(t, png.Encode(&pic, img))
		cmd := exec.Command("xclip", "-selection", "clipboard", "-t", "image/png", "-i")
		cmd.Env, cmd.Stdin = d.Env(), bytes.NewReader(pic.Bytes())
		must(t, cmd.Run())
		// xclip's child takes the selection a moment after xclip returns.
		var got []byte
		var err error
		for end := time.Now().Add(30 * time.Second); !bytes.Equal(got, pic.Bytes()) && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			got, err = d.ClipboardImage(ctx, 1<<20)
		}
		if !bytes.Equal(got, pic.Bytes()) {
			t.Fatalf("read %d bytes (%v); want the %d xclip set", len(got), err, pic.Len())
		}
		if _, err := d.ClipboardImage(ctx, int64(pic.Len()-1)); code(err) != vdi.ETooLarge {
			t.Errorf("a picture over the limit: %v; want too large", err)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		if err := d.SetClipboardImage(ctx, []byte("GIF89a not a png")); code(err) != vdi.EInvalid {
			t.Errorf("a GIF: %v; want invalid", err)
		}
		huge := append([]byte{}, pic.Bytes()...)
		copy(huge[16:24], []byte{0, 0, 0x7f, 0xff, 0, 0, 0x7f, 0xff}) // IHDR: 32767×32767
		binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
		if err := d.SetClipboardImage(ctx, huge); code(err) != vdi.ETooLarge {
			t.Errorf("a 32767×32767 picture: %v; want too large", err)
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
