package e2e

import (
	"image"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// canvasReaches waits until the canvas under sel shows want, pixel for
// pixel, and returns the pixels that still differ after d (0: reached).
// A replay with H.264 can hold still for a second and more while it is
// still behind (noVNC reads no update while a video frame decodes, and on
// a loaded machine a key frame took 0.8 s), so a still canvas is not yet
// the end of it.
func canvasReaches(t *testing.T, page playwright.Page, sel string, want image.Image, d time.Duration) int {
	t.Helper()
	n := -1
	for end := time.Now().Add(testwait.D(d)); ; time.Sleep(500 * time.Millisecond) {
		if n = differingPixels(want, canvasPNG(t, page, sel)); n == 0 || time.Now().After(end) {
			return n
		}
	}
}

// stableCanvas waits until the canvas under sel stops changing and returns it.
func stableCanvas(t *testing.T, page playwright.Page, sel string) image.Image {
	t.Helper()
	prev := canvasPNG(t, page, sel)
	for range 20 {
		time.Sleep(700 * time.Millisecond)
		cur := canvasPNG(t, page, sel)
		if differingPixels(prev, cur) == 0 {
			return cur
		}
		prev = cur
	}
	t.Fatalf("canvas %s kept changing", sel)
	return nil
}

// unlikeCorner counts the pixels of img that differ from its top-left one,
// and all of them: an empty canvas is all its corner.
func unlikeCorner(img image.Image) (n, all int) {
	b := img.Bounds()
	c := img.At(b.Min.X, b.Min.Y)
	cr, cg, cb, _ := c.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != cr || g != cg || bl != cb {
				n++
			}
		}
	}
	return n, b.Dx() * b.Dy()
}
