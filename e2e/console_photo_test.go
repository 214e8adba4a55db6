package e2e

import (
	"bytes"
	"encoding/base64"
	endian "encoding/binary"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsole_VNCPhotoAsJPEG: a photo on a local desktop (xwud showing a
// gradient) reaches noVNC through the portal's hub as Tight JPEG at the
// Picture choice's quality: close to the desktop's own pixels (xwd of the
// root window) but not exact, while the xterm's text a tile away from the
// photo is exact, as the hub's lossless Tight sends it. The desktop's
// pointer shape reaches noVNC, which draws it locally.
func TestConsole_VNCPhotoAsJPEG(t *testing.T) {
	p, member := mustVNCDesktop(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	signIn(t, page, p, "alice", "/desktops/local/"+member+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	waitQuality(t, page, "auto sharp 8 2")
	// The pointer where the user put it, in a corner: noVNC draws it
	// locally (the Cursor pseudo-encoding), Xvnc no longer into the screen.
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	must(t, page.Mouse().Move(box.X+4, box.Y+box.Height-4))
	var cursor any
	if !eventually(10*time.Second, func() bool {
		cursor, _ = page.Evaluate(`() => getComputedStyle(document.querySelector('#screen canvas')).cursor`)
		s, _ := cursor.(string)
		return strings.HasPrefix(s, "url(")
	}) {
		t.Errorf("the canvas's cursor is %.60v: the desktop's pointer shape did not reach noVNC", cursor)
	}

	home := p.homeOf(member)
	var st syscall.Stat_t
	must(t, syscall.Stat(home, &st))
	photo := filepath.Join(home, "photo.xwd")
	must(t, os.WriteFile(photo, gradientXWD(320, 240), 0o644))
	must(t, os.Chown(photo, int(st.Uid), int(st.Gid)))
	shell := openGuestShell(t, p, "alice", member)
	shell.run("(xwud -noclick -in ~/photo.xwd >~/xwud.log 2>&1 &)")
	// Where openbox has put it, asked until two answers agree.
	var win, last image.Rectangle
	if !eventually(15*time.Second, func() bool {
		var ok bool
		last, win = win, image.Rectangle{}
		if win, ok = windowOf(shell.run("echo; xwininfo -name 'xwud: photo' 2>&1")); ok && win == last {
			return true
		}
		time.Sleep(500 * time.Millisecond)
		return false
	}) {
		t.Fatalf("xwud's window did not show: %s", shell.run("echo; cat ~/xwud.log"))
	}
	term, ok := windowOf(shell.run("echo; xwininfo -id $(xwininfo -root -tree | awk '/\\(\"xterm\" \"XTerm\"\\)/ {print $1; exit}') 2>&1"))
	if !ok {
		t.Fatal("the desktop's xterm is not there")
	}
	time.Sleep(time.Second) // drawn
	shell.run("xwd -root -silent -out ~/root.xwd")
	raw, err := os.ReadFile(filepath.Join(home, "root.xwd"))
	must(t, err)
	want, err := parseXWD(raw)
	must(t, err)
	text := term.Intersect(image.Rect(0, 0, win.Min.X-64, want.Rect.Max.Y)) // a tile away from the photo
	var photoErr float64
	var far int
	var farBox image.Rectangle
	if !eventually(15*time.Second, func() bool {
		got, err := canvasImage(page)
		if err != nil || got.Bounds() != want.Bounds() {
			return false
		}
		sum, n := 0, 0
		far, farBox = 0, image.Rectangle{}
		for y := want.Rect.Min.Y; y < want.Rect.Max.Y; y++ {
			for x := want.Rect.Min.X; x < want.Rect.Max.X; x++ {
				o := want.PixOffset(x, y)
				for i := range 3 {
					d := max(int(got.Pix[o+i])-int(want.Pix[o+i]), int(want.Pix[o+i])-int(got.Pix[o+i]))
					if image.Pt(x, y).In(win) {
						sum += d
						n++
					} else if d != 0 && image.Pt(x, y).In(text) {
						far++
						farBox = farBox.Union(image.Rect(x, y, x+1, y+1))
					}
				}
			}
		}
		photoErr = float64(sum) / float64(n)
		return photoErr < 6 && far == 0
	}) {
		t.Fatalf("the photo on the canvas: mean error %.2f per channel (want under 6); %d channels differ in the xterm's text %v, within %v (want 0); the photo is at %v", photoErr, far, text, farBox, win)
	}
	if text.Dx() < 400 || text.Dy() < 400 {
		t.Errorf("the xterm's text checked is only %v", text)
	}
	if photoErr == 0 {
		t.Errorf("the photo arrived exact: it was not sent as JPEG")
	}
	t.Logf("photo %v: mean error %.2f per channel", win, photoErr)
	screenshot(t, page, "photo")
}

// gradientXWD returns a w×h photo-like picture (gradients and grain) as an
// XWD file (ZPixmap, 24 bits in 32, most significant byte first) named
// "photo".
func gradientXWD(w, h int) []byte {
	const name = "photo\x00"
	fields := []uint32{100 + uint32(len(name)), 7, 2, 24, uint32(w), uint32(h), 0, 1, 32, 1, 32, 32, uint32(w * 4), 4,
		0xff0000, 0xff00, 0xff, 8, 0, 0, uint32(w), uint32(h), 0, 0, 0}
	var b bytes.Buffer
	endian.Write(&b, endian.BigEndian, fields)
	b.WriteString(name)
	rng := rand.New(rand.NewPCG(5, 6))
	for y := range h {
		for x := range w {
			n := byte(rng.IntN(8))
			b.Write([]byte{0, byte(x*247/w) + n, byte(y*247/h) + n, byte((x+y)*247/(w+h)) + n})
		}
	}
	return b.Bytes()
}

// parseXWD reads an xwd file of a 24-bit TrueColor screen as RGBA.
func parseXWD(b []byte) (*image.RGBA, error) {
	if len(b) < 100 {
		return nil, fmt.Errorf("xwd: %d bytes", len(b))
	}
	f := func(i int) int { return int(endian.BigEndian.Uint32(b[4*i:])) }
	headerSize, w, h, order, bpp, stride, ncolors := f(0), f(4), f(5), f(7), f(11), f(12), f(19)
	masks := [3]uint32{uint32(f(14)), uint32(f(15)), uint32(f(16))}
	if bpp != 32 || masks != [3]uint32{0xff0000, 0xff00, 0xff} {
		return nil, fmt.Errorf("xwd: %d bits a pixel, masks %x", bpp, masks)
	}
	pix := b[headerSize+12*ncolors:]
	if len(pix) < stride*h {
		return nil, fmt.Errorf("xwd: %d bytes of pixels for %dx%d", len(pix), w, h)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			var v uint32
			if p := pix[y*stride+4*x:]; order == 0 {
				v = endian.LittleEndian.Uint32(p)
			} else {
				v = endian.BigEndian.Uint32(p)
			}
			o := img.PixOffset(x, y)
			img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = byte(v>>16), byte(v>>8), byte(v), 255
		}
	}
	return img, nil
}

// windowOf reads a window's rectangle from xwininfo's output.
func windowOf(out string) (image.Rectangle, bool) {
	num := func(label string) (int, bool) {
		m := regexp.MustCompile(regexp.QuoteMeta(label) + `\s+(-?\d+)`).FindStringSubmatch(out)
		if m == nil {
			return 0, false
		}
		n, err := strconv.Atoi(m[1])
		return n, err == nil
	}
	x, ok1 := num("Absolute upper-left X:")
	y, ok2 := num("Absolute upper-left Y:")
	w, ok3 := num("Width:")
	h, ok4 := num("Height:")
	if !(ok1 && ok2 && ok3 && ok4) || strings.Contains(out, "No window") {
		return image.Rectangle{}, false
	}
	return image.Rect(x, y, x+w, y+h), true
}

// canvasImage returns noVNC's canvas as the page has drawn it.
func canvasImage(page playwright.Page) (*image.RGBA, error) {
	v, err := page.Evaluate(`() => document.querySelector('#screen canvas').toDataURL('image/png')`)
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "data:image/png;base64,"))
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	rgba, ok := img.(*image.RGBA)
	if !ok {
		rgba = image.NewRGBA(img.Bounds())
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
				rgba.Set(x, y, img.At(x, y))
			}
		}
	}
	return rgba, nil
}
