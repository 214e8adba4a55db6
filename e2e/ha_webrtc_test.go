package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// haRTCEnv is the replicas' environment for WebRTC in the HA install:
// H.264 from GStreamer beside each replica (the encoder sidecar's
// program) and each replica's own WebRTC UDP port; nil where this
// machine has no x264enc (scripts/deps.sh installs it).
func haRTCEnv(t *testing.T) []string {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Log("no GStreamer x264enc (scripts/deps.sh installs it): the replicas run without H.264 and WebRTC")
		return nil
	}
	return []string{"CORRAL_VDI_H264=gst-launch-1.0", "CORRAL_VDI_WEBRTC_UDP=" + rtcAddress() + ":0"}
}

// webrtcElsewhere: alice's page in Chromium opens her console on r,
// whose screen owner holds, and picks WebRTC in the Picture menu: r
// answers the offer with its own UDP port, and takes the video from
// owner's hub over a video link: r runs no encoder (the owner's hub
// does), and the desktop has no second upstream (the caller counts them). A full-screen churn she types in the desktop
// reaches the page as frames of the track (both colours, sampled from
// the video element) and not as H.264 over the websocket; the still
// screen after it is pixel-exact. Her page closes at the end.
func webrtcElsewhere(t *testing.T, hs *haScreen, r, owner *haReplica) {
	t.Helper()
	// Her page keeps the desktop's size: the other consoles here are
	// raw RFB clients, which do not follow a size change.
	if code := r.p.APIBody(t, "alice", "PUT", "/api/vdi/settings/size", `{"size":"actual"}`, nil); code != 204 {
		t.Fatalf("alice keeps the size 1:1: %d; want 204", code)
	}
	lb := MustStartNginxFor(t, "alice", r.p.URL)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	keepBrowserErrors(t, page, "ha-webrtc")
	if _, err := page.Goto(lb.User + "/desktops/" + hs.ns + "/" + hs.member + "?protocol=vnc"); err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	pickWebRTC(t, page, " of alice's console on "+r.name+", whose screen "+owner.name+" holds")
	at := []int{1100, 600}
	_, err := page.Evaluate(rtcWatch, at)
	must(t, err)
	_, err = page.Evaluate(`(line) => { const r = document.getElementById('screen').rfb;
		r.sendKey(0xff0d); for (const ch of line) r.sendKey(ch.charCodeAt(0)); r.sendKey(0xff0d); }`,
		"for i in $(seq 120); do xsetroot -solid '#c03020'; sleep 0.05; xsetroot -solid '#2040c0'; sleep 0.05; done; xsetroot -solid '#208040'")
	must(t, err)
	red, blue, green := [3]int{0xc0, 0x30, 0x20}, [3]int{0x20, 0x40, 0xc0}, [3]int{0x20, 0x80, 0x40}
	waitTrack(t, page, " on "+r.name, red, blue)
	// While the desktop churns: the owner's hub encodes, and r, whose
	// WebRTC peer sends the video, runs no encoder of its own.
	if !eventually(10*time.Second, func() bool { return encoders(owner) > 0 }) {
		t.Errorf("no H.264 encoder under %s, the screen's owner, while the track carried the churn; want its hub's", owner.name)
	}
	if n := encoders(r); n != 0 {
		t.Errorf("%d H.264 encoders under %s, where the browser is; want none: the video is %s's hub's", n, r.name, owner.name)
	}
	screenshot(t, page, "ha-webrtc-motion")
	waitScreen(t, page, 60*time.Second, "the still screen after the churn, pixel-exact", at, green)
	w := rtcWatched(t, page)
	if n := toFloat(w["rects"]); n != 0 {
		t.Errorf("%v H.264 rectangles came over the websocket on %s while the track carried the video; want none", n, r.name)
	}
	if !strings.Contains(owner.p.Log(), "video link opened") {
		t.Errorf("%s, the screen's owner, logged no video link; want the track's video from its hub", owner.name)
	}
	t.Logf("alice's track on %s: %v frames drawn, %v sampled, from %s's hub", r.name, rtcFrames(page), w["sampled"], owner.name)
	must(t, page.Close())
}

// encoders counts the H.264 encoders (gst-launch-1.0) running under r.
func encoders(r *haReplica) int {
	n := 0
	for _, p := range descendants(r.p.cmd.Process.Pid) {
		if p.comm == "gst-launch-1.0" {
			n++
		}
	}
	return n
}
