package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// pictureWatch is a JS function adding to h264Watch's counts the Tight
// rectangles noVNC reads and the canvas's turns between the colour
// loop's red and blue at desktop pixel [x, y].
const pictureWatch = `([x, y]) => {
  const rfb = document.getElementById('screen').rfb;
  const w = window.__h264;
  w.tight = 0;
  w.flips = 0;
  const tight = rfb._decoders[7];
  const tightRect = tight.decodeRect.bind(tight);
  tight.decodeRect = (...a) => { w.tight++; return tightRect(...a); };
  const canvas = document.querySelector('#screen canvas').getContext('2d', { willReadFrequently: true });
  let phase = '';
  setInterval(() => {
    const d = canvas.getImageData(x, y, 1, 1).data;
    const p = d[2] > d[0] ? 'blue' : 'red';
    if (p !== phase) { phase = p; w.flips++; }
  }, 15);
}`

// sentEncodings records the encoding lists of the SetEncodings messages
// page's websockets send from now on.
func sentEncodings(page playwright.Page) func() [][]int32 {
	var mu sync.Mutex
	var lists [][]int32
	page.OnWebSocket(func(ws playwright.WebSocket) {
		ws.OnFrameSent(func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			lists = append(lists, setEncodings(b)...)
		})
	})
	return func() [][]int32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lists)
	}
}

// pictureSteps checks, in TestConsole_H264's console, that each Picture
// choice asks the hub for what it says and gets it: a small window whose
// text changes ten times a second (typing's size of change) goes as tiles
// with Auto and as video with Fast; with Sharp the colour loop's whole
// screen churn goes on as tiles, no video at all; back on Auto. sent is
// the page's SetEncodings so far; at is a pixel of the root window;
// startLoop and stopLoop run the colour loop.
func pictureSteps(t *testing.T, page playwright.Page, g *guestShell, sent func() [][]int32, at []int, startLoop func(), stopLoop func(string)) {
	t.Helper()
	_, err := page.Evaluate(pictureWatch, at)
	must(t, err)
	watch := func() map[string]any {
		v, err := page.Evaluate(`() => window.__h264`)
		must(t, err)
		return v.(map[string]any)
	}
	// grows waits until the count named key grows by n, and returns the
	// counts then and before.
	grows := func(what, key string, n float64) (before, after map[string]any) {
		t.Helper()
		before = watch()
		waitFor(t, 60*time.Second, what, func() bool { after = watch(); return toFloat(after[key]) >= toFloat(before[key])+n })
		return before, after
	}
	// choose picks choice in the bar and waits until noVNC has asked the
	// hub for it: compression level, and encoding 50 still listed.
	choose := func(choice string, level int32) {
		t.Helper()
		_, err := page.GetByTestId("vnc-quality").SelectOption(playwright.SelectOptionValues{Values: &[]string{choice}})
		must(t, err)
		var last []int32
		waitFor(t, 15*time.Second, fmt.Sprintf("noVNC asks for %s (compression level %d) with H.264", choice, level), func() bool {
			lists := sent()
			if len(lists) == 0 {
				return false
			}
			last = lists[len(lists)-1]
			return slices.Contains(last, -256+level) && slices.Contains(last, 50)
		})
	}

	// A ticker: a small window whose last line changes every 100 ms.
	g.run("rm -f /tmp/tick.stop; xterm -geometry 24x2+900+60 -e sh -c 'i=0; while [ ! -e /tmp/tick.stop ]; do i=$((i+1)); echo $i; sleep 0.1; done' >/dev/null 2>&1 & TICK=$!")
	before, after := grows("the ticker as tiles with Auto", "tight", 15)
	if n := toFloat(after["rects"]) - toFloat(before["rects"]); n != 0 {
		t.Errorf("with Auto, %v H.264 rectangles came for a small window's changes; want tiles only", n)
	}
	choose("fast", 9)
	grows("the ticker as video with Fast", "rects", 5)
	choose("sharp", 1)
	grows("tiles again with Sharp", "tight", 5)
	startLoop()
	grows("the canvas turns with Sharp", "flips", 2)
	before, after = grows("the canvas turns six more times with Sharp", "flips", 6)
	if n := toFloat(after["rects"]) - toFloat(before["rects"]); n != 0 {
		t.Errorf("with Sharp, %v H.264 rectangles came while the whole screen turned 6 times; want none", n)
	}
	if toFloat(after["tight"]) <= toFloat(before["tight"]) {
		t.Errorf("with Sharp, no Tight rectangle came (%v before, %v after) while the canvas turned", before["tight"], after["tight"])
	}
	stopLoop("#208040")
	g.run("touch /tmp/tick.stop; wait $TICK")
	choose("auto", 2)
	pictureShots(t, page)
	t.Logf("Picture: Auto sent the ticker as tiles, Fast as video, Sharp the churn as %v Tight rectangles and no H.264", toFloat(after["tight"])-toFloat(before["tight"]))
}

// pictureNarrow is a JS function returning by how many pixels the
// Picture choice is too narrow for its chosen option's words (the arrow
// takes 24 px).
const pictureNarrow = `() => {
  const sel = document.getElementById('vnc-quality');
  const probe = document.createElement('span');
  probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
  probe.style.font = getComputedStyle(sel).font;
  probe.textContent = sel.selectedOptions[0].textContent;
  document.body.append(probe);
  const need = probe.getBoundingClientRect().width;
  probe.remove();
  return need + 24 - sel.clientWidth;
}`

// pictureShots takes screenshots of the console's bar with the Picture
// choice at the issue's three sizes (on a phone, in the opened menu), the
// desktop keeping its size, and checks that the choice's words are not
// cut (at 1024 px it read "Auto (s…").
func pictureShots(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.Evaluate(`() => { document.getElementById('screen').rfb.resizeSession = false; }`)
	must(t, err)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	for _, size := range issueSizes {
		must(t, page.SetViewportSize(size.width, size.height))
		// The bar folds (or not) at the next frame after a resize (fold.js).
		_, err := page.Evaluate(`() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))`)
		must(t, err)
		menu := page.GetByTestId("console-menu")
		folded, _ := menu.IsVisible()
		if folded {
			must(t, menu.Click())
		}
		must(t, expect.Locator(page.GetByTestId("vnc-quality")).ToBeVisible())
		v, err := page.Evaluate(pictureNarrow)
		must(t, err)
		if over := toFloat(v); over > 0 {
			t.Errorf("at %s the Picture choice is %.0f px too narrow for its words", size.name, over)
		}
		screenshot(t, page, "picture-"+size.name)
		if folded {
			must(t, menu.Click())
		}
	}
	must(t, page.SetViewportSize(1280, 800))
}
