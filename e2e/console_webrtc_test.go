package e2e

import (
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// rtcWatch is a JS function that counts, in the console's noVNC, the
// Open H.264 rectangles that come over the websocket, and samples the
// colour at desktop pixel [x, y] of each ready video frame the page
// hands to noVNC's screen: the WebRTC track's, where no rectangle came
// (read from the frame, not from the canvas, which the tiles also paint).
const rtcWatch = `([x, y]) => {
  const rfb = document.getElementById('screen')?.rfb;
  const dec = rfb?._decoders?.[50];
  const w = window.__rtc = { rects: 0, colours: [], sampled: 0 };
  if (dec) {
    const decodeRect = dec.decodeRect.bind(dec);
    dec.decodeRect = (...a) => { w.rects++; return decodeRect(...a); };
  }
  const scratch = document.createElement('canvas');
  scratch.width = scratch.height = 1;
  const g = scratch.getContext('2d', { willReadFrequently: true });
  const display = rfb._display;
  const videoFrame = display.videoFrame.bind(display);
  display.videoFrame = (fx, fy, fw, fh, f) => {
    if (f.ready && f.frame) {
      g.drawImage(f.frame, x, y, 1, 1, 0, 0, 1, 1);
      w.colours.push(Array.from(g.getImageData(0, 0, 1, 1).data.slice(0, 3)));
      if (w.colours.length > 200) w.colours.shift();
      w.sampled++;
    }
    return videoFrame(fx, fy, fw, fh, f);
  };
  return true;
}`

// rtcStats is a JS function describing the console's WebRTC peer for a
// failed wait: its states, its inbound video's counts and size, and the
// console's framebuffer size.
const rtcStats = `async () => {
  const pc = document.getElementById('screen')?.rtcPeer;
  if (!pc) return 'no peer';
  const out = { connection: pc.connectionState, ice: pc.iceConnectionState };
  (await pc.getStats()).forEach((r) => {
    if (r.type === 'inbound-rtp') Object.assign(out, { packets: r.packetsReceived, lost: r.packetsLost, decoded: r.framesDecoded, received: r.framesReceived, dropped: r.framesDropped, keyFrames: r.keyFramesDecoded, pli: r.pliCount, codec: r.codecId, decoder: r.decoderImplementation, w: r.frameWidth, h: r.frameHeight });
  });
  out.video = document.getElementById('screen')?.dataset.rtcVideo || 'none'; // the last frame drawn's size
  const rfb = document.getElementById('screen')?.rfb; // the page draws a frame only where it covers this
  out.fb = rfb ? { w: rfb._fbWidth, h: rfb._fbHeight } : 'none';
  return JSON.stringify(out);
}`

// rtcAddress returns an address of this machine a browser here reaches
// over UDP: its first IPv4 address that is not loopback (Chromium gathers
// no loopback candidates of its own), else 127.0.0.1.
func rtcAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

// TestConsole_WebRTC: with the WebRTC path on, a VNC console in Chromium
// keeps its video on the websocket on loopback (Auto takes WebRTC past a
// WAN's round trip: TestConsole_WebRTCOverWAN); with the Picture menu's
// WebRTC it offers a track over its websocket, the browser reaches the portal's
// one UDP port, and the desktop's motion comes as H.264 on the track —
// not one H.264 rectangle over the websocket — drawn into noVNC's
// screen as the browser decodes it (read from the track, no video
// element); once the desktop is still, the screen is its exact pixels (the
// lossless repaint over the websocket). Input stays on the websocket: a
// key typed in the console reaches the desktop. The desktop is
// recorded: the recording holds the video the track carried (each frame
// put between the websocket's messages), and the player replays it to
// the console's last screen.
func TestConsole_WebRTC(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_H264=gst-launch-1.0",
		"CORRAL_VDI_WEBRTC_UDP="+rtcAddress()+":0")
	d := recordedPool(t, p, "video", "alice")
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "1280x800")
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	screen := page.Locator("#screen")
	waitQuality(t, page, "auto sharp 8 2")
	must(t, expect.Locator(screen).ToHaveAttribute("data-rtc-why", "The Picture choice keeps the video on the console's connection."))
	pickWebRTC(t, page, "")
	at := []int{1100, 600}
	_, err := page.Evaluate(rtcWatch, at)
	must(t, err)
	g := openGuestShell(t, p, "alice", d.Name)
	red, blue, green := [3]int{0xc0, 0x30, 0x20}, [3]int{0x20, 0x40, 0xc0}, [3]int{0x20, 0x80, 0x40}
	g.run(rtcChurn)
	waitTrack(t, page, "", red, blue)
	// Chromium's frames come from the track as it decodes them, not from a
	// hidden video element's frame callbacks (which follow what it paints).
	if v, err := page.Evaluate(`() => !!window.MediaStreamTrackProcessor && !!document.querySelector('#screen video')`); err != nil || v != false {
		t.Errorf("the page took the track's frames from a video element (%v, %v); want them read from the track (MediaStreamTrackProcessor)", v, err)
	}
	screenshot(t, page, "webrtc-motion")
	g.run(rtcChurnEnd)
	waitScreen(t, page, 60*time.Second, "the still screen, pixel-exact", at, green)
	w := rtcWatched(t, page)
	if n := toFloat(w["rects"]); n != 0 {
		t.Errorf("%v H.264 rectangles came over the websocket while the track carried the video; want none", n)
	}
	t.Logf("the track's video: %v frames drawn into noVNC, %v sampled", rtcFrames(page), w["sampled"])
	if s, _ := screen.GetAttribute("data-rtc"); s != "connected" {
		why, _ := screen.GetAttribute("data-rtc-why")
		t.Errorf("after the motion the track is %q (%s); want connected", s, why)
	}
	live := stableCanvas(t, page, "#screen canvas")
	must(t, page.Close())
	// The desktop is recorded: the recording holds the video the track
	// carried, and the player replays it to the same screen.
	playVideoRecording(t, b, p, d.Name, live, "webrtc-playback-end")
}

// pickWebRTC picks WebRTC in the console's Picture menu on page and waits
// for its track to connect, failing t with the page's reason (and a
// screenshot) where it does not; where names the console for that
// message. It returns the console's screen.
func pickWebRTC(t *testing.T, page playwright.Page, where string) playwright.Locator {
	t.Helper()
	screen := page.Locator("#screen")
	_, err := page.GetByTestId("vnc-quality").SelectOption(playwright.SelectOptionValues{Values: &[]string{"webrtc"}})
	must(t, err)
	if err := playwright.NewPlaywrightAssertions(testwait.MS(30000)).Locator(screen).ToHaveAttribute("data-rtc", "connected"); err != nil {
		why, _ := screen.GetAttribute("data-rtc-why")
		screenshot(t, page, "webrtc-not-connected")
		t.Fatalf("the WebRTC track%s: %v (%s)", where, err, why)
	}
	return screen
}

// rtcChurn is a guest shell's command that paints the whole screen red
// and blue in turn until /tmp/loop.stop appears (rtcChurnEnd).
const rtcChurn = "rm -f /tmp/loop.stop; (while [ ! -e /tmp/loop.stop ]; do xsetroot -solid '#c03020'; sleep 0.05; xsetroot -solid '#2040c0'; sleep 0.05; done) >/dev/null 2>&1 & LOOP=$!"

// rtcChurnEnd stops rtcChurn and leaves the screen still, green.
const rtcChurnEnd = "touch /tmp/loop.stop; wait $LOOP; xsetroot -solid '#208040'"

// rtcWatched returns rtcWatch's record of the page.
func rtcWatched(t *testing.T, page playwright.Page) map[string]any {
	t.Helper()
	v, err := page.Evaluate(`() => window.__rtc`)
	must(t, err)
	w, _ := v.(map[string]any)
	return w
}

// rtcFrames returns how many frames of its WebRTC track the console drew.
func rtcFrames(page playwright.Page) int {
	v, _ := page.Locator("#screen").GetAttribute("data-rtc-frames")
	n, _ := strconv.Atoi(v)
	return n
}

// waitTrack waits up to 60 s for the console's WebRTC track (watched by
// rtcWatch) to draw 10 frames and show each of colours at the watched
// pixel, and fails t with the track's state if it does not; where names
// the console for that message.
func waitTrack(t *testing.T, page playwright.Page, where string, colours ...[3]int) {
	t.Helper()
	var w map[string]any
	if eventually(60*time.Second, func() bool {
		v, err := page.Evaluate(`() => window.__rtc`)
		if err != nil {
			return false
		}
		w = v.(map[string]any)
		return toFloat(w["sampled"]) >= 10 && rtcFrames(page) >= 10 && seenColours(w, colours...)
	}) {
		return
	}
	stats, err := page.Evaluate(rtcStats)
	screenshot(t, page, "webrtc-no-frames")
	t.Fatalf("after 60s, the track's frames of %v not drawn%s: %v frames drawn, %v sampled, %d colours, %v H.264 rectangles over the websocket; the track: %v (%v)",
		colours, where, rtcFrames(page), w["sampled"], len(w["colours"].([]any)), w["rects"], stats, err)
}

// seenColours reports whether the colours a watch sampled (w["colours"],
// as rtcWatch and the H.264 watch keep them) come within 40 of each of
// want.
func seenColours(w map[string]any, want ...[3]int) bool {
	cs, _ := w["colours"].([]any)
	for _, c := range want {
		if !slices.ContainsFunc(cs, func(s any) bool { sc, _ := s.([]any); return nearColour(sc, c, 40) }) {
			return false
		}
	}
	return true
}
