package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// clipboardPictures moves a picture from the browser's clipboard to the
// desktop's with the clipboard panel's Paste picture, and another from
// the desktop's (set by xclip in it) to the browser's with Copy desktop's
// picture; each arrives with the same pixels (Chromium re-encodes the
// PNGs it puts on its clipboard, so the pixels are compared, not the
// bytes). The panel is open on page, a console of the desktop shell is in.
func clipboardPictures(t *testing.T, page playwright.Page, shell *guestShell) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, page.Context().GrantPermissions([]string{"clipboard-read", "clipboard-write"}))
	t.Cleanup(func() { page.Context().ClearPermissions() }) // later steps read no text on focus

	t.Run("browser to desktop", func(t *testing.T) {
		pic := testPicture(64, 48, color.NRGBA{200, 30, 40, 255})
		_, err := page.Evaluate(`async (b64) => {
			const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
			await navigator.clipboard.write([new ClipboardItem({ 'image/png': new Blob([bytes], { type: 'image/png' }) })]);
		}`, base64.StdEncoding.EncodeToString(pic))
		must(t, err)
		must(t, page.GetByTestId("clipboard-image-send").Click())
		must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText("picture on the desktop's clipboard"))
		// As a program in the desktop pastes it.
		out := shell.run("echo; echo \"<<$(xclip -selection clipboard -t image/png -o | base64 -w0)>>\"")
		got := between(out, "<<", ">>")
		if want := pixelSum(t, pic); pixelSum(t, decodeB64(t, got)) != want {
			t.Errorf("the desktop's clipboard picture (%d base64 characters) has other pixels than the browser's", len(got))
		}
	})

	t.Run("desktop to browser", func(t *testing.T) {
		pic := testPicture(50, 70, color.NRGBA{20, 160, 90, 255})
		b64 := base64.StdEncoding.EncodeToString(pic)
		// xclip returns before its child owns the selection: wait until
		// the desktop's clipboard gives this picture.
		shell.run(fmt.Sprintf("echo %s | base64 -d > /tmp/pic.png; xclip -selection clipboard -t image/png -i /tmp/pic.png; "+
			"for i in $(seq 200); do xclip -selection clipboard -t image/png -o 2>/dev/null | cmp -s - /tmp/pic.png && break; sleep 0.1; done", b64))
		must(t, page.GetByTestId("clipboard-image-get").Click())
		must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText("Copied the desktop's picture"))
		must(t, expect.Locator(page.GetByTestId("clipboard-image")).ToBeVisible())
		v, err := page.Evaluate(`async () => {
			const item = (await navigator.clipboard.read()).find((i) => i.types.includes('image/png'));
			if (!item) return '';
			const bytes = new Uint8Array(await (await item.getType('image/png')).arrayBuffer());
			return btoa(String.fromCharCode(...bytes));
		}`)
		must(t, err)
		if got := pixelSum(t, decodeB64(t, v.(string))); got != pixelSum(t, pic) {
			t.Errorf("the browser's clipboard picture has other pixels than the desktop's")
		}
		was := page.ViewportSize()
		for _, size := range [][2]int{{1280, 800}, {1024, 1366}, {390, 844}} {
			must(t, page.SetViewportSize(size[0], size[1]))
			time.Sleep(500 * time.Millisecond) // the page lays itself out; only the screenshot waits
			screenshot(t, page, fmt.Sprintf("clipboard-pictures-%dx%d", size[0], size[1]))
		}
		must(t, page.SetViewportSize(was.Width, was.Height)) // as the steps after this one had it
		eventually(20*time.Second, func() bool { return near(shell.dimensions(), screenSize(t, page), 2) })
	})
}

// testPicture is a w×h PNG of bg with a pattern, opaque (so that no
// encoder's alpha handling changes its pixels).
func testPicture(w, h int, bg color.NRGBA) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{bg}, image.Point{}, draw.Src)
	for i := range min(w, h) {
		img.Set(i, i, color.NRGBA{255, 255, uint8(i * 5), 255})
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// pixelSum is the SHA-256 of a PNG's size and NRGBA pixels.
func pixelSum(t *testing.T, pic []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pic))
	if err != nil {
		return "not a PNG: " + err.Error()
	}
	n := image.NewNRGBA(img.Bounds())
	draw.Draw(n, n.Bounds(), img, img.Bounds().Min, draw.Src)
	return fmt.Sprintf("%v %x", n.Bounds().Size(), sha256.Sum256(n.Pix))
}

func decodeB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		t.Errorf("base64 %.40q…: %v", s, err)
	}
	return b
}

// between returns what s has between the last from and the to after it.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s[max(0, strings.LastIndex(s, from)):], from)
	v, _, _ := strings.Cut(rest, to)
	return v
}
