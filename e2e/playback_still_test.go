package e2e

import (
	"fmt"
	"image"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// playbackWithoutWebCodecs plays recording id, which holds H.264 video,
// to its end in a page without WebCodecs (noVNC's H.264 decoder needs
// them, and would fail the whole playback at the first video rectangle):
// the player skips the video's spans, says so under the player, and ends
// on the live screen, since the hub repaints losslessly once motion ends.
// Looked at at laptop, tablet and phone sizes.
func playbackWithoutWebCodecs(t *testing.T, b *Browser, p *Portal, id string, live image.Image) {
	t.Helper()
	plain := b.MustNewPage(t, 1280, 800)
	must(t, plain.AddInitScript(playwright.Script{Content: playwright.String(`delete window.VideoDecoder;`)}))
	signIn(t, plain, p, "ops", "/admin/recordings/"+id)
	player := plain.GetByTestId("player")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
	_, err := plain.GetByTestId("timeline").Evaluate(`(el) => { el.value = el.max; el.dispatchEvent(new Event('change')); }`, nil)
	must(t, err)
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
	must(t, expect.Locator(plain.GetByTestId("player-note")).ToContainText("no WebCodecs"))
	must(t, expect.Locator(player).ToHaveAttribute("data-video", "still"))
	must(t, expect.Locator(plain.GetByTestId("player-error")).ToBeHidden())
	n := canvasReaches(t, plain, "#player canvas", live, 30*time.Second)
	screenshot(t, plain, "h264-playback-without-webcodecs")
	if n != 0 {
		t.Errorf("without WebCodecs, the replayed screen differs from the live one %v in %d pixels (-1: in size)", live.Bounds(), n)
	}
	for _, size := range [][2]int{{1024, 1366}, {390, 844}} {
		must(t, plain.SetViewportSize(size[0], size[1]))
		screenshot(t, plain, fmt.Sprintf("h264-playback-without-webcodecs-%dx%d", size[0], size[1]))
	}
	must(t, plain.Close())
}
