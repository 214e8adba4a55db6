package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// A console window's canvas against a desktop's own picture of its
// display (a QEMU guest's screendump): what the window shows of it, its
// part or all of it, pixel for pixel.

// canvasShot is what a console window's canvas shows.
type canvasShot struct {
	img    image.Image
	scaled bool        // all of the desktop, scaled to the window (noVNC's scaleViewport)
	size   image.Point // its size on the page, in whole pixels
}

// canvasOf reads win's console canvas.
func canvasOf(t *testing.T, win playwright.Page) canvasShot {
	t.Helper()
	v, err := win.Evaluate(`() => { const c = document.querySelector('#screen canvas'); const b = c.getBoundingClientRect();
		return { png: c.toDataURL('image/png'), scaled: document.getElementById('screen').rfb.scaleViewport, w: b.width, h: b.height }; }`)
	must(t, err)
	m := v.(map[string]any)
	_, data, _ := strings.Cut(m["png"].(string), ",")
	b, err := base64.StdEncoding.DecodeString(data)
	must(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	must(t, err)
	return canvasShot{img: img, scaled: m["scaled"] == true, size: image.Pt(toInt(m["w"]), toInt(m["h"]))}
}

// differ counts the pixels of shot that differ from dump's at the same
// place, shot's top-left corner at at (a colour off by more than 32 in
// any channel, or no such place in dump), out of all of shot's.
func differ(shot, dump image.Image, at image.Point) (n, total int) {
	sb := shot.Bounds()
	for y := range sb.Dy() {
		for x := range sb.Dx() {
			total++
			p := at.Add(image.Pt(x, y)).Add(dump.Bounds().Min)
			if !p.In(dump.Bounds()) || !samePixel(shot.At(sb.Min.X+x, sb.Min.Y+y), dump.At(p.X, p.Y)) {
				n++
			}
		}
	}
	return n, total
}

// samePixel reports whether two colours are within 32 in each channel.
func samePixel(a, b color.Color) bool {
	r1, g1, b1, _ := a.RGBA()
	r2, g2, b2, _ := b.RGBA()
	return abs(int(r1>>8)-int(r2>>8)) <= 32 && abs(int(g1>>8)-int(g2>>8)) <= 32 && abs(int(b1>>8)-int(b2>>8)) <= 32
}

// colours counts the colours of img's rect r, at every 8th pixel.
func colours(img image.Image, r image.Rectangle) int {
	seen := map[[3]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y += 8 {
		for x := r.Min.X; x < r.Max.X; x += 8 {
			c1, c2, c3, _ := img.At(x, y).RGBA()
			seen[[3]uint32{c1 >> 8, c2 >> 8, c3 >> 8}] = true
		}
	}
	return len(seen)
}

// showsPart waits until win's canvas shows, unscaled, the part of the
// desktop of size at at, as dump pictures it (within 1% of its pixels:
// the encoding may round a colour), and checks that this is its part
// only: the desktop's next part along is another picture.
func showsPart(t *testing.T, win playwright.Page, name string, dump func() image.Image, at, size image.Point) {
	t.Helper()
	var why string
	var shot canvasShot
	var d image.Image
	if !eventually(time.Minute, func() bool {
		d, shot = dump(), canvasOf(t, win)
		switch {
		case shot.scaled:
			why = fmt.Sprintf("all of the %v desktop, scaled", d.Bounds().Size())
		case shot.img.Bounds().Size() != size:
			why = fmt.Sprintf("a %v canvas", shot.img.Bounds().Size())
		default:
			n, total := differ(shot.img, d, at)
			why = fmt.Sprintf("a picture of which %d of %d pixels differ from the screendump's part at %v", n, total, at)
			return n*100 <= total
		}
		return false
	}) {
		keepPictures(t, name, shot.img, d)
		state, _ := win.Evaluate(noVNCState, []int{0, 0})
		t.Errorf("%s shows %s; want the %v part of the desktop at %v (noVNC: %v)", name, why, size, at, state)
		return
	}
	other := image.Pt(size.X, 0) // the part beside, for windows side by side
	if at.X != 0 {
		other = image.Pt(0, 0)
	}
	if n, total := differ(shot.img, d, other); n*10 < total*3 {
		keepPictures(t, name, shot.img, d)
		t.Errorf("%s's part at %v is the part at %v too but for %d of %d pixels; want a picture whose parts differ", name, at, other, n, total)
	}
	if c := colours(d, image.Rectangle{Min: at, Max: at.Add(size)}); c < 6 {
		t.Errorf("the screendump's part at %v has %d colours; want the pattern's 8", at, c)
	}
}

// showsAll waits until win's canvas shows all of the desktop (dump),
// scaled to fit its window, while the desktop is not asked, the size of
// the windows together that it did not take.
func showsAll(t *testing.T, win playwright.Page, name string, dump func() image.Image, asked image.Point) {
	t.Helper()
	var why string
	var shot canvasShot
	var d image.Image
	if !eventually(time.Minute, func() bool {
		d, shot = dump(), canvasOf(t, win)
		w, h := wholeSize(t, win)
		switch ds := d.Bounds().Size(); {
		case ds == asked:
			why = fmt.Sprintf("a desktop of %v, the windows together", ds)
		case !shot.scaled:
			why = "a part of the desktop, unscaled"
		case shot.img.Bounds().Size() != ds:
			why = fmt.Sprintf("a %v canvas of a %v desktop", shot.img.Bounds().Size(), ds)
		case shot.size.X > w || shot.size.Y > h:
			why = fmt.Sprintf("the desktop at %v on the page, more than its %dx%d window", shot.size, w, h)
		default:
			n, total := differ(shot.img, d, image.Point{})
			why = fmt.Sprintf("a picture of which %d of %d pixels differ from the screendump", n, total)
			return n*100 <= total
		}
		return false
	}) {
		keepPictures(t, name, shot.img, d)
		state, _ := win.Evaluate(noVNCState, []int{0, 0})
		t.Errorf("%s shows %s; want all of the desktop, scaled, the guest not at the asked %v (noVNC: %v)", name, why, asked, state)
	}
}

// keepPictures saves a canvas and the screendump it was compared with
// beside the test's screenshots, to look at after a failure.
func keepPictures(t *testing.T, name string, shot, dump image.Image) {
	t.Helper()
	dir := filepath.Join("output", t.Name())
	must(t, os.MkdirAll(dir, 0o755))
	for what, img := range map[string]image.Image{"canvas": shot, "screendump": dump} {
		if img == nil {
			continue
		}
		var buf bytes.Buffer
		must(t, png.Encode(&buf, img))
		must(t, os.WriteFile(filepath.Join(dir, strings.Map(fileRune, name)+"-"+what+".png"), buf.Bytes(), 0o644))
	}
}

// fileRune keeps letters and digits of a window's name for a file name.
func fileRune(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
		return r
	}
	return '-'
}
