package e2e

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// wanWorkloads are the workloads the report gives a row each: frames,
// bytes and CPU while they run.
var wanWorkloads = []string{"scroll", "churn", "video", "drag"}

// wanPrint prints one run's row of the report.
func wanPrint(r wanRun) {
	s := slices.Clone(r.typing)
	slices.Sort(s)
	pct := func(p float64) float64 {
		if len(s) == 0 {
			return -1
		}
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	name := strings.ToUpper(r.console)
	if r.quality != "-" {
		name += " " + r.quality
	}
	fmt.Printf("BENCH %-16s %-17s typing p50 %4.0f ms p99 %4.0f (%d keys) | idle %5.1f KiB/min (link %5.1f) | 2 s after the churn %6.1f KiB\n", name, r.profile, pct(0.5), pct(0.99), len(s), r.idleKiBMin, r.idleLinkKiBMin, r.settleKiB)
	if len(r.idleUDP) > 0 {
		fmt.Printf("BENCH   idle UDP from the portal (%s %s %s): %v bytes\n", r.console, r.profile, r.quality, r.idleUDP)
	}
	for _, w := range wanWorkloads {
		fmt.Printf("BENCH %-16s %-17s   %-6s %5.1f fps %7.0f KiB/s %6.1f KiB/frame  portal CPU %5.1f%%  encoder CPU %5.1f%%  desktop server CPU %5.1f%%\n",
			name, r.profile, w, r.fps[w], r.kbps[w], perFrame(r, w), r.portalCPU[w], r.encCPU[w], r.xCPU[w])
	}
	if r.dragMoved < 250 { // halfway it should be ~500 px across
		fmt.Printf("BENCH   drag (%s %s %s): the window had moved %d px halfway, not ~500: its row is no drag's\n", r.console, r.profile, r.quality, r.dragMoved)
	}
}

// perFrame returns the KiB sent per changed frame of workload w.
func perFrame(r wanRun, w string) float64 {
	if r.fps[w] == 0 {
		return 0
	}
	return r.kbps[w] / r.fps[w]
}

// wanCompare prints, for one profile, the H.264 row against the auto tiles
// row of the same run, and the WebRTC rows against those and each other:
// the ratios of bytes per frame, of bytes per second and of frame rates,
// per workload.
func wanCompare(runs []wanRun) {
	var tiles, video, rtc, rtcElement *wanRun
	for i := range runs {
		switch runs[i].quality {
		case "h264":
			video = &runs[i]
		case "webrtc":
			rtc = &runs[i]
		case "webrtc-element":
			rtcElement = &runs[i]
		case "before", "-", "sharp", "fast":
		default: // auto, shown with the level it chose
			tiles = &runs[i]
		}
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	compare := func(name string, a, b *wanRun) {
		if a == nil || b == nil {
			return
		}
		for _, w := range wanWorkloads {
			fmt.Printf("BENCH %-16s %-17s   %-6s bytes/frame ×%.2f  bytes/s ×%.2f  fps ×%.2f  (%s / %s)\n", name, a.profile, w,
				ratio(perFrame(*a, w), perFrame(*b, w)), ratio(a.kbps[w], b.kbps[w]), ratio(a.fps[w], b.fps[w]), a.quality, b.quality)
		}
	}
	compare("VNC h264:tiles", video, tiles)
	compare("VNC webrtc:tiles", rtc, tiles)
	compare("VNC webrtc:h264", rtc, video)
	compare("VNC webrtc:element", rtc, rtcElement)
}

// freeUDPPort returns a UDP port free now on every address.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp4", "0.0.0.0:0")
	must(t, err)
	defer c.Close()
	return strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port)
}

// encoderSeconds returns the CPU time the portal's H.264 encoders used:
// the live gst-launch-1.0 processes the portal started (its children: a
// desktop's own, such as the video workload's player, are further down),
// and the children the portal has reaped (an encoder it restarted;
// nothing else it runs is reaped by the portal itself while a workload
// runs).
func encoderSeconds(pid int) float64 {
	var s float64
	if _, f, err := procStat(pid); err == nil {
		cu, _ := strconv.ParseFloat(f[13], 64)
		cs, _ := strconv.ParseFloat(f[14], 64)
		s += (cu + cs) / 100
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, f, err := procStat(n)
		if err != nil || comm != "gst-launch-1.0" || f[1] != strconv.Itoa(pid) {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		s += (u + st) / 100
	}
	return s
}

// desktopServer returns the pid of the newest process named comm among the
// descendants of pid (the desktop's X server).
func desktopServer(t *testing.T, pid int, comm string) int {
	t.Helper()
	var found int
	waitFor(t, 30*time.Second, comm+" under the portal", func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n))
			if strings.TrimSpace(string(c)) == comm && descends(n, pid) && n > found {
				found = n
			}
		}
		return found != 0
	})
	return found
}

// descends reports whether process n has pid among its ancestors.
func descends(n, pid int) bool {
	for n > 1 {
		_, f, err := procStat(n)
		if err != nil || len(f) < 2 {
			return false
		}
		n, _ = strconv.Atoi(f[1])
		if n == pid {
			return true
		}
	}
	return false
}

// pidLine returns the last line of s that starts with "pid=".
func pidLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "pid=") {
			return lines[i]
		}
	}
	return ""
}

// wanRTCKeys are the inbound video track's counters the bench prints
// for the churn over WebRTC (RTCInboundRtpStreamStats): whether frames
// were lost on the way (loss, NACKs, key frame requests, freezes) or
// never sent (few frames received).
var wanRTCKeys = []string{"packetsReceived", "packetsLost", "nackCount", "pliCount", "framesReceived", "framesDecoded", "keyFramesDecoded", "framesDropped", "freezeCount"}

// wanRTCStats returns the console's WebRTC track's inbound counters
// (nil when rtc is false).
func wanRTCStats(t *testing.T, page playwright.Page, rtc bool) map[string]float64 {
	if !rtc {
		return nil
	}
	v, err := page.Evaluate(`async () => {
  const pc = document.getElementById('screen').rtcPeer, out = {};
  if (!pc) return out;
  (await pc.getStats()).forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'video') for (const k in s) if (typeof s[k] === 'number') out[k] = s[k]; });
  return out;
}`)
	must(t, err)
	m := map[string]float64{}
	for k, x := range v.(map[string]any) {
		m[k] = toFloat(x)
	}
	return m
}
