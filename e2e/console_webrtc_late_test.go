package e2e

import (
	"os/exec"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// lateFrames is an init script that lets a test hold back each frame a
// MediaStreamTrackProcessor gives the page by window.__rtcLateMS (0: at
// once), one at a time: the processor keeps the newest two meanwhile, as
// on a machine whose decoder or network lags behind the websocket.
const lateFrames = `(() => {
  const Base = window.MediaStreamTrackProcessor;
  if (!Base) return;
  window.__rtcLateMS = 0;
  const readable = Object.getOwnPropertyDescriptor(Base.prototype, 'readable');
  Object.defineProperty(Base.prototype, 'readable', {
    get() {
      this.__late ??= readable.get.call(this).pipeThrough(new TransformStream({
        transform(frame, out) {
          const ms = window.__rtcLateMS;
          if (!ms) return out.enqueue(frame);
          return new Promise((done) => setTimeout(() => { out.enqueue(frame); done(); }, ms));
        },
      }));
      return this.__late;
    },
  });
})();`

// TestConsole_WebRTCLateFrames: the track's last frames of a motion reach
// the page after the hub's lossless repaint (held back 2 s here; on a
// loaded machine the track's way — UDP, across replicas a video link —
// lagged the websocket by as much): the page notices that no tiles
// covered the screen after the last frame it drew, asks for the whole
// screen once, and the still screen ends pixel-exact, not on the late
// lossy frame.
func TestConsole_WebRTCLateFrames(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_H264=gst-launch-1.0",
		"CORRAL_VDI_WEBRTC_UDP="+rtcAddress()+":0")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "late", "size": 1}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	d := mustClaim(t, p, "alice", "late")
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "1280x800")
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(lateFrames)}))
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(30000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	screen := pickWebRTC(t, page, "")
	at := []int{1100, 600}
	_, err := page.Evaluate(rtcWatch, at)
	must(t, err)
	g := openGuestShell(t, p, "alice", d.Name)
	red, blue, green := [3]int{0xc0, 0x30, 0x20}, [3]int{0x20, 0x40, 0xc0}, [3]int{0x20, 0x80, 0x40}
	// churn runs the full-screen churn until the track drew both colours,
	// holds the track's frames back by lateMS from then, and ends it on
	// the still green.
	churn := func(lateMS int) {
		_, err := page.Evaluate(`() => { window.__rtc.colours = []; window.__rtc.sampled = 0; }`)
		must(t, err)
		g.run(rtcChurn)
		waitTrack(t, page, "", red, blue)
		_, err = page.Evaluate(`(ms) => { window.__rtcLateMS = ms; window.__rtc.colours = []; }`, lateMS)
		must(t, err)
		g.run(rtcChurnEnd)
	}
	repaints := func() string {
		v, _ := screen.GetAttribute("data-rtc-repaints")
		return v
	}

	// In time: the hub's repaint comes after the last frame (how often
	// the page asked anyway, on a loaded machine, is logged).
	churn(0)
	waitScreen(t, page, 60*time.Second, "the still screen, pixel-exact", at, green)
	time.Sleep(2 * time.Second) // past the page's wait after the last frame
	before := repaints()
	t.Logf("frames in time: the page asked for the whole screen %q times", before)

	// Late: the last frames land 2 s after the hub's repaint. A loaded
	// browser held that long may draw no frame of the churn at all (its
	// decoder waits on the frames held back): then there were no late
	// frames to judge, and the churn runs again, up to three times.
	var cs []any
	late := false
	for try := 1; try <= 3 && !late; try++ {
		churn(2000)
		late = eventually(60*time.Second, func() bool {
			cs, _ = rtcWatched(t, page)["colours"].([]any)
			return len(cs) > 0 && nearColour(cs[len(cs)-1].([]any), green, 40)
		})
		if !late && len(cs) == 0 {
			stats, _ := page.Evaluate(rtcStats)
			t.Logf("churn %d: the track drew no frame after the lateness was set; the track: %v", try, stats)
			_, err := page.Evaluate(`() => { window.__rtcLateMS = 0; }`)
			must(t, err)
			waitScreen(t, page, 60*time.Second, "the still screen again", at, green)
			time.Sleep(2 * time.Second) // past the page's wait after the last frame
			before = repaints()         // what the next churn's late frames must add to
			continue
		}
		break
	}
	if !late {
		stats, _ := page.Evaluate(rtcStats)
		t.Fatalf("the frames the track drew late: %v; want the still screen's green last; %d frames drawn; the track: %v", cs, rtcFrames(page), stats)
	}
	waitScreen(t, page, 60*time.Second, "the still screen after late frames, pixel-exact", at, green)
	if n := repaints(); n == before {
		t.Errorf("the still screen is exact but the page did not ask for it again (%q times before, %q now); want a repaint asked for after the late frames", before, n)
	}
	t.Logf("the last late frame drawn: %v (the still screen %v); the page asked for the screen %s times", cs[len(cs)-1], green, repaints())
}
