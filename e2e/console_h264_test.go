package e2e

import (
	"image"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// h264Watch is a JS function that counts, in the console's noVNC, the Open
// H.264 rectangles it reads and the frames it draws from them, keeps the
// colour at desktop pixel [x, y] of each decoded frame and the last three
// decoded pictures whole (read from the decoder's own VideoFrame, cropped
// to the rectangle as noVNC draws it, not from the canvas, which tiles
// also paint), and reports whether noVNC has an H.264 decoder at all.
const h264Watch = `([x, y]) => {
  const rfb = document.getElementById('screen')?.rfb;
  const dec = rfb?._decoders?.[50];
  if (!dec) return false;
  const w = window.__h264 = { rects: 0, frames: 0, colours: [], errors: [] };
  const pictures = window.__h264pictures = [];
  const decodeRect = dec.decodeRect.bind(dec);
  dec.decodeRect = (...a) => { w.rects++; return decodeRect(...a); };
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
        const p = document.createElement('canvas');
        p.width = rw;
        p.height = rh;
        p.getContext('2d').drawImage(pending.frame, 0, 0, rw, rh, 0, 0, rw, rh);
        pictures.push(p);
        if (pictures.length > 3) pictures.shift();
      } catch (e) { w.errors.push(String(e)); }
    });
    return videoFrame(rx, ry, rw, rh, pending);
  };
  return true;
}`

// decodedMatch is a JS function comparing each decoded picture h264Watch
// kept with the console's canvas once the desktop is still (lossless
// tiles: the desktop's own pixels), the [still] background colour being
// [a], [b] or still itself in the pictures (the still screen's change may
// come as the burst's last frame): it returns, per picture, its size, how
// many background pixels are within 40 of one of those, how many there
// are, and the mean difference per channel elsewhere (the xterm and its
// text, where the colour loop changes nothing; lossy in the video).
const decodedMatch = `([still, a, b]) => {
  const cv = document.querySelector('#screen canvas');
  const live = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  const near = (d, i, c) => Math.abs(d[i] - c[0]) <= 40 && Math.abs(d[i + 1] - c[1]) <= 40 && Math.abs(d[i + 2] - c[2]) <= 40;
  return window.__h264pictures.map((p) => {
    if (p.width !== cv.width || p.height !== cv.height) return { size: p.width + 'x' + p.height };
    const d = p.getContext('2d').getImageData(0, 0, p.width, p.height).data;
    let bg = 0, bgNear = 0, fg = 0, diff = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (live[i] === still[0] && live[i + 1] === still[1] && live[i + 2] === still[2]) {
        bg++;
        if (near(d, i, a) || near(d, i, b) || near(d, i, still)) bgNear++;
        continue;
      }
      fg++;
      diff += Math.abs(d[i] - live[i]) + Math.abs(d[i + 1] - live[i + 1]) + Math.abs(d[i + 2] - live[i + 2]);
    }
    return { size: p.width + 'x' + p.height, bg, bgNear, fg, mean: fg ? diff / fg / 3 : 0 };
  });
}`

// canvasPixel is a JS function returning the console canvas's colour at
// desktop pixel [x, y].
const canvasPixel = `([x, y]) => Array.from(document.querySelector('#screen canvas').getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))`

// noVNCState is a JS function describing the console's noVNC for a
// failed wait: its connection state, whether it waits for its display,
// the display's queue (each entry's type, and for a video frame whether
// it was decoded), the H.264 decoder's contexts and their WebCodecs
// states, what h264Watch counted, and the canvas at desktop pixel [x, y].
const noVNCState = `([x, y]) => {
  const rfb = document.getElementById('screen')?.rfb;
  if (!rfb) return 'no noVNC';
  const q = rfb._display._renderQ.map((a) => a.type === 'frame' ? 'frame:' + a.frame.ready : a.type);
  const ctx = Object.entries(rfb._decoders[50]?._contexts || {}).map(([k, c]) => k + ':' + (c._decoder ? c._decoder.state + '/' + c._decoder.decodeQueueSize : 'none') + '/pending ' + c._pendingFrames.length);
  const px = Array.from(document.querySelector('#screen canvas').getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3));
  return JSON.stringify({ state: rfb._rfbConnectionState, flushing: rfb._flushing, rQ: rfb._sock.rQlen ?? null, queue: q.slice(0, 12), queued: q.length, contexts: ctx, watch: { ...window.__h264, colours: undefined }, video: document.getElementById('screen').dataset.video, pixel: px });
}`

// waitScreen waits until the console's canvas is exactly want at desktop
// pixel at; if it is not within d, it saves a screenshot and fails with
// noVNC's state.
func waitScreen(t *testing.T, page playwright.Page, d time.Duration, what string, at []int, want [3]int) {
	t.Helper()
	if eventually(d, func() bool {
		c, err := page.Evaluate(canvasPixel, at)
		return err == nil && nearColour(c.([]any), want, 0)
	}) {
		return
	}
	state, err := page.Evaluate(noVNCState, at)
	screenshot(t, page, "not-"+strings.ReplaceAll(what, " ", "-"))
	t.Fatalf("after %v: want %s; noVNC: %v (%v)", testwait.D(d), what, state, err)
}

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

// playVideoRecording plays member's one VNC recording to its end as an
// admin (ops), screenshots its end as shot, and checks that the player's
// noVNC decoded the recorded video (at least 10 H.264 chunks) and ended
// on live, the console's last screen. It returns the recording.
func playVideoRecording(t *testing.T, b *Browser, p *Portal, member string, live image.Image, shot string) api.Recording {
	t.Helper()
	rec := recordings(t, p, member, 1)["vnc"]
	admin := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, admin, "player")
	must(t, admin.AddInitScript(playwright.Script{Content: playwright.String(countDecodes)}))
	signIn(t, admin, p, "ops", "/admin/recordings/"+rec.ID)
	player := admin.GetByTestId("player")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
	_, err := admin.GetByTestId("timeline").Evaluate(`(el) => { el.value = el.max; el.dispatchEvent(new Event('change')); }`, nil)
	must(t, err)
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
	// The end of the replay is the live screen, however long noVNC takes
	// to decode its way there.
	n := canvasReaches(t, admin, "#player canvas", live, 60*time.Second)
	screenshot(t, admin, shot)
	decodes, err := admin.Evaluate(`() => window.__decodes`)
	must(t, err)
	t.Logf("recording %s, %d bytes: the player decoded %v H.264 chunks", rec.ID, rec.Bytes, decodes)
	if toFloat(decodes) < 10 {
		t.Errorf("the player decoded %v H.264 chunks; want the recorded video's (at least 10)", decodes)
	}
	if n != 0 {
		t.Errorf("after 60s the replayed screen differs from the live one %v in %d pixels (-1: in size)", live.Bounds(), n)
	}
	return rec
}

// TestConsole_H264: with the portal's H.264 encoder on (the default,
// auto, which finds gst-launch-1.0's x264enc here; the harness sets no
// h264, so every e2e portal runs as this one does), a VNC console in
// Chromium gets the desktop's motion as Open H.264 (RFB encoding 50):
// noVNC's WebCodecs decoder draws the frames, and the decoded pixels are
// the desktop's (its root window switching between two colours); once the
// desktop is still, the screen is painted again losslessly and ends
// pixel-exact. Each Picture choice gets what it says (pictureSteps). A
// decoder that fails takes the page to tiles (vnc-video.js). The pool is
// recorded: the recording holds the video, and the player (noVNC again,
// with WebCodecs) replays it to the same screen.
func TestConsole_H264(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if !strings.Contains(p.Log(), "H.264 on: gst-launch-1.0 encodes here") {
		t.Fatalf("the e2e portal with the default h264 on a machine with x264enc did not say H.264 is on; its log:\n%s", p.Log())
	}
	d := recordedPool(t, p, "video", "alice")
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "1280x800")
	sent := sentEncodings(page)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(30000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))

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
	// The colour loop flips the root window a few times a window of the
	// hub's motion rule: the whole screen changing fast goes as video (a
	// slower slideshow goes as tiles).
	startLoop := func() {
		g.run("rm -f /tmp/loop.stop; (while [ ! -e /tmp/loop.stop ]; do xsetroot -solid '#c03020'; sleep 0.05; xsetroot -solid '#2040c0'; sleep 0.05; done) >/dev/null 2>&1 & LOOP=$!")
	}
	// stopLoop ends the loop, waits for it, and paints the root colour.
	// The loop ends itself after its last xsetroot: killed, it left that
	// xsetroot running, which on a loaded machine painted red or blue
	// after the still colour, and Xvnc, finding its screen as last sent,
	// sent nothing more (the still screen "never came" in 1 run of 4).
	stopLoop := func(colour string) {
		g.run("touch /tmp/loop.stop; wait $LOOP; xsetroot -solid '" + colour + "'")
	}
	startLoop()
	var w map[string]any
	waitFor(t, 60*time.Second, "noVNC draws H.264 frames of both colours", func() bool {
		v, err := page.Evaluate(`() => window.__h264`)
		if err != nil {
			return false
		}
		w = v.(map[string]any)
		return toFloat(w["frames"]) >= 10 && seenColours(w, red, blue)
	})
	stopLoop("#208040")
	waitScreen(t, page, 60*time.Second, "the still screen, pixel-exact", at, green)
	screenshot(t, page, "h264-still")
	v, err := page.Evaluate(`() => window.__h264`)
	must(t, err)
	w = v.(map[string]any)
	if errs := w["errors"].([]any); len(errs) > 0 {
		t.Errorf("reading decoded frames: %v", errs)
	}
	if n, got := toFloat(w["frames"]), len(w["colours"].([]any))+len(w["errors"].([]any)); got != int(n) {
		t.Errorf("WebCodecs gave %d of the %v frames noVNC waited for", got, n)
	}
	// The hub's video, through Chromium's decoder, is the desktop's
	// picture: the burst's last decoded frames against the still screen's
	// lossless pixels.
	m, err := page.Evaluate(decodedMatch, [][]int{green[:], red[:], blue[:]})
	must(t, err)
	compared := 0
	for _, r := range m.([]any) {
		r := r.(map[string]any)
		if r["bg"] == nil {
			t.Logf("a decoded picture of %v, not the still screen's size", r["size"])
			continue
		}
		compared++
		bg, bgNear, mean := toFloat(r["bg"]), toFloat(r["bgNear"]), toFloat(r["mean"])
		t.Logf("decoded %v: %v of %v background pixels red, blue or green, the rest %.1f off per channel on average", r["size"], bgNear, bg, mean)
		if bg < 100000 || bgNear < 0.98*bg || mean > 12 {
			t.Errorf("a decoded %v picture is not the desktop's: %v of %v background pixels red, blue or green (want 98%%), the xterm %.1f off per channel (want at most 12)", r["size"], bgNear, bg, mean)
		}
	}
	if compared == 0 {
		t.Error("no decoded picture of the still screen's size to compare")
	}
	pictureSteps(t, page, g, sent, at, startLoop, stopLoop)

	// A decoder that fails (WebCodecs closes it on an error) never gives
	// the frame noVNC waits for, which stalled noVNC for good: the page's
	// watchdog takes the console off video and the screen goes on as tiles.
	_, err = page.Evaluate(`() => {
	  const decode = VideoDecoder.prototype.decode;
	  VideoDecoder.prototype.decode = function (chunk) {
	    VideoDecoder.prototype.decode = decode;
	    this.close();
	    return decode.call(this, chunk);
	  };
	}`)
	must(t, err)
	rects := func() float64 {
		v, err := page.Evaluate(`() => window.__h264.rects`)
		if err != nil {
			return -1
		}
		return toFloat(v)
	}
	before := rects()
	startLoop()
	waitFor(t, 60*time.Second, "video again, to the failing decoder", func() bool { return rects() > before })
	waitFor(t, 60*time.Second, "the page to notice the lost frame and go on with tiles", func() bool {
		v, err := page.Evaluate(`() => document.getElementById('screen').dataset.video`)
		return err == nil && v == "tiles"
	})
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(30000)).Locator(page.GetByTestId("video-notice")).ToContainText(videoNoticeWords))
	purple := [3]int{0x80, 0x30, 0x70}
	stopLoop("#803070")
	waitScreen(t, page, 60*time.Second, "the still screen after the lost frame, pixel-exact", at, purple)
	screenshot(t, page, "h264-lost-frame-tiles")
	t.Logf("%v H.264 rectangles read, %v frames drawn, %d decoded colours sampled", w["rects"], w["frames"], len(w["colours"].([]any)))
	live := stableCanvas(t, page, "#screen canvas")
	videoNoticeShots(t, page)
	must(t, page.Close())

	rec := playVideoRecording(t, b, p, d.Name, live, "h264-playback-end")
	playbackWithoutWebCodecs(t, b, p, rec.ID, live)

	// A browser without WebCodecs never asks for video.
	consoleWithoutWebCodecs(t, b, p, "alice", d.Name, at, purple)
}
