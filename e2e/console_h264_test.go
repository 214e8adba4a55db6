package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// h264Watch is a JS function that counts, in the console's noVNC, the Open
// H.264 and Tight rectangles it reads and the frames it draws from the
// first, keeps the colour at desktop pixel [x, y] of each decoded frame
// (read from the decoder's own VideoFrame, not the canvas, which tiles
// also paint), counts the canvas's turns between red and blue there, and
// reports whether noVNC has an H.264 decoder at all.
const h264Watch = `([x, y]) => {
  const rfb = document.getElementById('screen')?.rfb;
  const dec = rfb?._decoders?.[50];
  if (!dec) return false;
  const w = window.__h264 = { rects: 0, tight: 0, frames: 0, flips: 0, colours: [], errors: [] };
  const decodeRect = dec.decodeRect.bind(dec);
  dec.decodeRect = (...a) => { w.rects++; return decodeRect(...a); };
  const tight = rfb._decoders[7];
  const tightRect = tight.decodeRect.bind(tight);
  tight.decodeRect = (...a) => { w.tight++; return tightRect(...a); };
  // The canvas's turns between the reddish and the bluish phase, at [x, y].
  const canvas = document.querySelector('#screen canvas').getContext('2d');
  let phase = '';
  setInterval(() => {
    const d = canvas.getImageData(x, y, 1, 1).data;
    const p = d[2] > d[0] ? 'blue' : 'red';
    if (p !== phase) { phase = p; w.flips++; }
  }, 15);
  const scratch = document.createElement('canvas');
  scratch.width = scratch.height = 1;
  const g = scratch.getContext('2d', { willReadFrequently: true });
  const display = rfb._display;
  const videoFrame = display.videoFrame.bind(display);
  display.videoFrame = (rx, ry, rw, rh, pending) => {
    w.frames++;
    pending.promise.then(() => {
      try {
        g.drawImage(pending.frame, x - rx, y - ry, 1, 1, 0, 0, 1, 1);
        w.colours.push(Array.from(g.getImageData(0, 0, 1, 1).data.slice(0, 3)));
      } catch (e) { w.errors.push(String(e)); }
    });
    return videoFrame(rx, ry, rw, rh, pending);
  };
  return true;
}`

// canvasPixel is a JS function returning the console canvas's colour at
// desktop pixel [x, y].
const canvasPixel = `([x, y]) => Array.from(document.querySelector('#screen canvas').getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))`

// nearColour reports whether colour c is within tol of want on every channel.
func nearColour(c []any, want [3]int, tol int) bool {
	if len(c) != 3 {
		return false
	}
	for i := range 3 {
		if d := int(toFloat(c[i])) - want[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

// countDecodes is an init script counting the chunks any WebCodecs
// VideoDecoder of the page is given (the player's noVNC makes its own).
const countDecodes = `(() => {
  if (!window.VideoDecoder) return;
  window.__decodes = 0;
  const Base = window.VideoDecoder;
  window.VideoDecoder = class extends Base {
    decode(chunk) { window.__decodes++; return super.decode(chunk); }
  };
})();`

// pictureSteps switches the console's Picture choice while its desktop
// churns (TestConsole_H264's loop): with Sharp the canvas goes on turning
// red and blue from Tight rectangles and no H.264 comes; with Fast the
// video comes back.
func pictureSteps(t *testing.T, page playwright.Page) {
	t.Helper()
	watch := func() map[string]any {
		v, err := page.Evaluate(`() => window.__h264`)
		must(t, err)
		return v.(map[string]any)
	}
	choose := func(choice string, level int) {
		t.Helper()
		_, err := page.GetByTestId("vnc-quality").SelectOption(playwright.SelectOptionValues{Values: &[]string{choice}})
		must(t, err)
		waitFor(t, 15*time.Second, "noVNC sends compression level "+fmt.Sprint(level), func() bool {
			v, err := page.Evaluate(`() => document.getElementById('screen').rfb.compressionLevel`)
			return err == nil && toFloat(v) == float64(level)
		})
	}
	// flips waits until the canvas turned n more times.
	flips := func(what string, n float64) map[string]any {
		t.Helper()
		from := toFloat(watch()["flips"])
		var w map[string]any
		waitFor(t, 60*time.Second, what, func() bool { w = watch(); return toFloat(w["flips"]) >= from+n })
		return w
	}
	choose("sharp", 1)
	flips("the canvas turns with Sharp (any video on the way drawn)", 4)
	before := watch()
	after := flips("the canvas turns six more times with Sharp", 6)
	if got := toFloat(after["rects"]) - toFloat(before["rects"]); got != 0 {
		t.Errorf("with Sharp, %v H.264 rectangles came while the canvas turned 6 times; want none", got)
	}
	if toFloat(after["tight"]) <= toFloat(before["tight"]) {
		t.Errorf("with Sharp, no Tight rectangle came (%v before, %v after) while the canvas turned", before["tight"], after["tight"])
	}
	t.Logf("Sharp: %v Tight rectangles while the canvas turned 6 times, no H.264", toFloat(after["tight"])-toFloat(before["tight"]))
	choose("fast", 9)
	from := toFloat(watch()["rects"])
	waitFor(t, 60*time.Second, "H.264 again with Fast", func() bool { return toFloat(watch()["rects"]) >= from+5 })
}

// TestConsole_H264: with the portal's H.264 encoder on, a VNC console in
// Chromium gets the desktop's motion as Open H.264 (RFB encoding 50):
// noVNC's WebCodecs decoder draws the frames, and the decoded pixels are
// the desktop's (its root window a pattern of noise, which tiles code
// dearly, switching between reddish and bluish); the Picture choice Sharp
// stops the video (the changes go on as tiles) and Fast brings it back;
// once the desktop is still, the screen is painted again losslessly and
// ends pixel-exact. The pool is recorded: the recording holds the video,
// and the player (noVNC again, with WebCodecs) replays it to the same
// screen; in a browser without WebCodecs the player skips the video's
// spans, says so, and ends on the same screen too.
func TestConsole_H264(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_H264=gst-launch-1.0")
	d := recordedPool(t, p, "video", "alice")
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "1280x800")
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, playwright.NewPlaywrightAssertions(30000).Locator(page.GetByTestId("status")).ToHaveText("Connected"))

	// A point of the root window, right of and below the desktop's xterm
	// (100x30 characters at +40+40).
	at := []int{1100, 600}
	ok, err := page.Evaluate(h264Watch, at)
	must(t, err)
	if ok != true {
		t.Fatal("noVNC has no H.264 decoder in this Chromium (WebCodecs)")
	}
	g := openGuestShell(t, p, "alice", d.Name)
	red, blue, green := [3]int{0xc0, 0x30, 0x20}, [3]int{0x20, 0x40, 0xc0}, [3]int{0x20, 0x80, 0x40}
	// The root window a random pattern of two close colours (a flat colour
	// costs next to nothing as tiles, so Auto would send it as tiles),
	// reddish and bluish in turn.
	g.run(`{ echo '#define n_width 1280'; echo '#define n_height 800'; echo 'static unsigned char n_bits[] = {'; od -An -v -tx1 -N128000 /dev/urandom | awk '{for(i=1;i<=NF;i++){printf "%s0x%s", s, $i; s=","}} END{print "};"}'; } >/tmp/n.xbm`)
	pid := g.run("(while :; do xsetroot -bitmap /tmp/n.xbm -fg '#c03020' -bg '#b02818'; sleep 0.05; xsetroot -bitmap /tmp/n.xbm -fg '#2040c0' -bg '#3050b0'; sleep 0.05; done) >/dev/null 2>&1 & echo PID=$!")
	var loop int
	if i := strings.LastIndex(pid, "PID="); i < 0 {
		t.Fatalf("the colour loop's pid: %q", pid)
	} else if _, err := fmt.Sscanf(pid[i+4:], "%d", &loop); err != nil {
		t.Fatalf("the colour loop's pid: %q: %v", pid, err)
	}
	var w map[string]any
	seen := func(want [3]int) bool {
		for _, c := range w["colours"].([]any) {
			if nearColour(c.([]any), want, 40) {
				return true
			}
		}
		return false
	}
	waitFor(t, 60*time.Second, "noVNC draws H.264 frames of both colours", func() bool {
		v, err := page.Evaluate(`() => window.__h264`)
		if err != nil {
			return false
		}
		w = v.(map[string]any)
		return toFloat(w["frames"]) >= 10 && seen(red) && seen(blue)
	})
	pictureSteps(t, page)
	g.run(fmt.Sprintf("kill %d; wait; xsetroot -solid '#208040'", loop))
	waitFor(t, 30*time.Second, "the still screen, pixel-exact", func() bool {
		c, err := page.Evaluate(canvasPixel, at)
		return err == nil && nearColour(c.([]any), green, 0)
	})
	screenshot(t, page, "h264-still")
	v, err := page.Evaluate(`() => window.__h264`)
	must(t, err)
	w = v.(map[string]any)
	if errs := w["errors"].([]any); len(errs) > 0 {
		t.Errorf("reading decoded frames: %v", errs)
	}
	t.Logf("%v H.264 rectangles read, %v frames drawn, %d decoded colours sampled", w["rects"], w["frames"], len(w["colours"].([]any)))
	live := stableCanvas(t, page, "#screen canvas")
	must(t, page.Close())

	// The recording, played to its end by an admin.
	rec := recordings(t, p, d.Name, 1)["vnc"]
	admin := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, admin, "player")
	must(t, admin.AddInitScript(playwright.Script{Content: playwright.String(countDecodes)}))
	signIn(t, admin, p, "ops", "/admin/recordings/"+rec.ID)
	player := admin.GetByTestId("player")
	expect := playwright.NewPlaywrightAssertions(60000)
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
	_, err = admin.GetByTestId("timeline").Evaluate(`(el) => { el.value = el.max; el.dispatchEvent(new Event('change')); }`, nil)
	must(t, err)
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
	replayed := stableCanvas(t, admin, "#player canvas")
	screenshot(t, admin, "h264-playback-end")
	decodes, err := admin.Evaluate(`() => window.__decodes`)
	must(t, err)
	t.Logf("recording %s, %d bytes: the player decoded %v H.264 chunks", rec.ID, rec.Bytes, decodes)
	if toFloat(decodes) < 10 {
		t.Errorf("the player decoded %v H.264 chunks; want the recorded video's (at least 10)", decodes)
	}
	if n := differingPixels(live, replayed); n != 0 {
		t.Errorf("the replayed screen %v differs from the live one %v in %d pixels", replayed.Bounds(), live.Bounds(), n)
	}
	must(t, admin.Close())

	// The same recording in a browser without WebCodecs: it plays to its
	// end, the video's spans still, says so, and ends on the same screen.
	plain := b.MustNewPage(t, 1280, 800)
	must(t, plain.AddInitScript(playwright.Script{Content: playwright.String(`delete window.VideoDecoder;`)}))
	signIn(t, plain, p, "ops", "/admin/recordings/"+rec.ID)
	player = plain.GetByTestId("player")
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
	_, err = plain.GetByTestId("timeline").Evaluate(`(el) => { el.value = el.max; el.dispatchEvent(new Event('change')); }`, nil)
	must(t, err)
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
	must(t, expect.Locator(plain.GetByTestId("player-note")).ToContainText("no WebCodecs"))
	must(t, expect.Locator(player).ToHaveAttribute("data-video", "still"))
	still := stableCanvas(t, plain, "#player canvas")
	screenshot(t, plain, "h264-playback-without-webcodecs")
	if n := differingPixels(live, still); n != 0 {
		t.Errorf("without WebCodecs, the replayed screen %v differs from the live one %v in %d pixels", still.Bounds(), live.Bounds(), n)
	}
	for _, size := range [][2]int{{1024, 1366}, {390, 844}} {
		must(t, plain.SetViewportSize(size[0], size[1]))
		screenshot(t, plain, fmt.Sprintf("h264-playback-without-webcodecs-%dx%d", size[0], size[1]))
	}
}
