package testbrowser

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// CanvasPNG returns the canvas under sel (noVNC's, a player's) as an
// image, pixel for pixel as the page drew it.
func CanvasPNG(t *testing.T, page playwright.Page, sel string) image.Image {
	t.Helper()
	v, err := page.Evaluate(`(sel) => { const c = document.querySelector(sel); return c ? c.toDataURL('image/png') : ''; }`, sel)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.(string)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "data:image/png;base64,"))
	if err != nil || s == "" {
		t.Fatalf("canvas %s: %v", sel, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// DifferingPixels counts the pixels where a and b differ (alpha aside);
// -1 when their sizes do.
func DifferingPixels(a, b image.Image) int {
	if a.Bounds() != b.Bounds() {
		return -1
	}
	n := 0
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, _ := a.At(x, y).RGBA()
			br, bg, bb, _ := b.At(x, y).RGBA()
			if ar != br || ag != bg || ab != bb {
				n++
			}
		}
	}
	return n
}
