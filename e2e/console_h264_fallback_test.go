package e2e

import (
	be "encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// videoNoticeWords is what the console says when its browser could not
// decode the video (static/app/vnc-video.js).
const videoNoticeWords = "Video decoding failed in this browser; showing the screen as tiles."

// videoNoticeShots takes screenshots of the console page's notice that
// video is off at tablet and phone sizes, the desktop keeping its size (the
// page scales it: the recording stays the live screen's), then dismisses
// the notice.
func videoNoticeShots(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.Evaluate(`() => { document.getElementById('screen').rfb.resizeSession = false; }`)
	must(t, err)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	notice := page.GetByTestId("video-notice")
	for _, s := range [][2]int{{1024, 1366}, {390, 844}} {
		must(t, page.SetViewportSize(s[0], s[1]))
		must(t, expect.Locator(notice).ToBeVisible())
		screenshot(t, page, fmt.Sprintf("h264-video-notice-%dx%d", s[0], s[1]))
	}
	must(t, page.GetByTestId("video-notice-dismiss").Click())
	must(t, expect.Locator(notice).ToBeHidden())
}

// noWebCodecs is an init script making the page a browser without
// WebCodecs.
const noWebCodecs = `delete window.VideoDecoder; delete window.VideoFrame; delete window.EncodedVideoChunk;`

// setEncodings returns the encoding lists of the RFB SetEncodings
// messages in a websocket frame a noVNC page sent (noVNC's lists start
// with CopyRect).
func setEncodings(b []byte) [][]int32 {
	var lists [][]int32
	for i := 0; i+8 <= len(b); i++ {
		n := int(be.BigEndian.Uint16(b[i+2:]))
		if b[i] != 2 || b[i+1] != 0 || n == 0 || i+4+4*n > len(b) || be.BigEndian.Uint32(b[i+4:]) != 1 {
			continue
		}
		encs := make([]int32, n)
		for k := range encs {
			encs[k] = int32(be.BigEndian.Uint32(b[i+4+4*k:]))
		}
		lists = append(lists, encs)
	}
	return lists
}

// consoleWithoutWebCodecs opens user's VNC console of desktop in a page
// of a browser without WebCodecs: noVNC never lists the Open H.264
// encoding (50), the page shows no notice (there was no video to lose),
// and the screen is the desktop's, pixel-exact at at (want).
func consoleWithoutWebCodecs(t *testing.T, b *Browser, p *Portal, user, desktop string, at []int, want [3]int) {
	t.Helper()
	page := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "no WebCodecs")
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(noWebCodecs)}))
	sent := sentEncodings(page)
	signIn(t, page, p, user, "/desktops/local/"+desktop+"?protocol=vnc")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	waitFor(t, time.Minute, "the screen without WebCodecs, pixel-exact", func() bool {
		c, err := page.Evaluate(canvasPixel, at)
		return err == nil && nearColour(c.([]any), want, 0)
	})
	must(t, expect.Locator(page.GetByTestId("video-notice")).ToBeHidden())
	lists := sent()
	if len(lists) == 0 {
		t.Fatal("no SetEncodings message seen from the page without WebCodecs")
	}
	for _, encs := range lists {
		for _, e := range encs {
			if e == 50 {
				t.Errorf("a page without WebCodecs listed the Open H.264 encoding: %v", encs)
			}
		}
	}
	t.Logf("without WebCodecs the page listed %v", lists[0])
}
