package e2e

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestAudio_ToneReachesThePage plays a 440 Hz tone into the desktop's
// sink and listens in the console page: nothing is fetched while the
// speaker is off; once on, the page's analyser hears the tone (its
// loudest bin at 440 Hz); off again, the socket closes. The time from
// loading the tone in the desktop to hearing it in the page is logged
// (measured, not asserted).
func TestAudio_ToneReachesThePage(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1280, 800)
	var mu sync.Mutex
	var sockets []playwright.WebSocket
	page.OnWebSocket(func(ws playwright.WebSocket) {
		if strings.Contains(ws.URL(), "/ws/audio/") {
			mu.Lock()
			sockets = append(sockets, ws)
			mu.Unlock()
		}
	})
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	shell := openGuestShell(t, p, "alice", d.Name)
	speaker := page.GetByTestId("audio-toggle")
	must(t, expect.Locator(speaker).ToBeVisible())
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	opened := len(sockets)
	mu.Unlock()
	if opened != 0 {
		t.Fatalf("%d audio sockets opened while the speaker is off", opened)
	}

	must(t, speaker.Click())
	must(t, expect.Locator(speaker).ToHaveAttribute("aria-pressed", "true"))
	start := time.Now()
	out := shell.run("pactl load-module module-sine sink=corral frequency=440")
	if strings.Contains(out, "Failure") || strings.Contains(out, "Connection refused") {
		t.Fatalf("pactl in the desktop: %q", out)
	}
	var heard map[string]any
	if !eventually(10*time.Second, func() bool {
		v, err := page.Evaluate(`() => {
			const a = window.corralAudio && window.corralAudio.analyser;
			if (!a) return { level: 0 };
			const bins = new Float32Array(a.frequencyBinCount);
			a.getFloatFrequencyData(bins);
			let peak = 0;
			for (let i = 1; i < bins.length; i++) if (bins[i] > bins[peak]) peak = i;
			return { level: bins[peak], hz: peak * a.context.sampleRate / a.fftSize, at: Date.now() };
		}`)
		if err != nil {
			return false
		}
		heard = v.(map[string]any)
		level, _ := heard["level"].(float64)
		hz, _ := heard["hz"].(float64)
		return level > -50 && hz > 400 && hz < 480
	}) {
		t.Fatalf("the page never heard the tone: last %v", heard)
	}
	t.Logf("tone heard at %.0f Hz, %.0f dB, %v after it was first loaded in the desktop (the encoder's start included)",
		heard["hz"], heard["level"], time.Since(start).Round(time.Millisecond))
	screenshot(t, page, "audio-on")

	// The latency of a running stream: silence, then the tone again, timed
	// from the moment the desktop's shell is told to play it to the first
	// animation frame in which the page hears it (one clock: this host's).
	shell.run("pactl unload-module module-sine")
	quiet := `() => {
		const a = window.corralAudio.analyser, bins = new Float32Array(a.frequencyBinCount);
		a.getFloatFrequencyData(bins);
		return bins[Math.round(440 * a.fftSize / a.context.sampleRate)] < -70;
	}`
	if !eventually(5*time.Second, func() bool { v, err := page.Evaluate(quiet); return err == nil && v == true }) {
		t.Fatal("the tone did not stop in the page after it stopped in the desktop")
	}
	time.Sleep(300 * time.Millisecond)
	_, err := page.Evaluate(`() => {
		window.heardAt = 0;
		const a = window.corralAudio.analyser, bins = new Float32Array(a.frequencyBinCount);
		const want = Math.round(440 * a.fftSize / a.context.sampleRate);
		const tick = () => {
			a.getFloatFrequencyData(bins);
			if (bins[want] > -50) { window.heardAt = Date.now(); return; }
			requestAnimationFrame(tick);
		};
		tick();
	}`)
	must(t, err)
	sent := time.Now()
	go shell.ws.WriteMessage(1, []byte("pactl load-module module-sine sink=corral frequency=440; echo LOADED-AT-$(date +%s%3N)-\r"))
	var at float64
	if !eventually(5*time.Second, func() bool {
		v, err := page.Evaluate("() => String(window.heardAt)")
		if err == nil {
			at, _ = strconv.ParseFloat(v.(string), 64)
		}
		return at > 0
	}) {
		v, _ := page.Evaluate(`() => { const a = window.corralAudio && window.corralAudio.analyser; if (!a) return 'no player'; const b = new Float32Array(a.frequencyBinCount); a.getFloatFrequencyData(b); return Math.max(...b) + ' at ' + b.indexOf(Math.max(...b)) + ' want ' + Math.round(440 * a.fftSize / a.context.sampleRate) + ': ' + b[19]; }`)
		t.Fatalf("the page did not hear the tone a second time: %v; shell: %q", v, shell.out.String()[max(0, shell.out.Len()-300):])
	}
	heardAt := time.UnixMilli(int64(at))
	var loaded time.Time
	eventually(5*time.Second, func() bool {
		shell.mu.Lock()
		out := shell.out.String()
		shell.mu.Unlock()
		i := strings.LastIndex(out, "LOADED-AT-1")
		if i < 0 {
			return false
		}
		ms, err := strconv.ParseInt(strings.TrimSuffix(strings.Fields(out[i+len("LOADED-AT-"):])[0], "-"), 10, 64)
		loaded = time.UnixMilli(ms)
		return err == nil
	})
	// The tone starts while pactl runs: the truth lies between the two.
	t.Logf("latency: %v from the shell being told to play the tone to the page hearing it; %v from pactl having loaded it",
		heardAt.Sub(sent).Round(time.Millisecond), heardAt.Sub(loaded).Round(time.Millisecond))

	must(t, speaker.Click())
	must(t, expect.Locator(speaker).ToHaveAttribute("aria-pressed", "false"))
	mu.Lock()
	ws := sockets[len(sockets)-1]
	mu.Unlock()
	if !eventually(5*time.Second, ws.IsClosed) {
		t.Error("the audio socket stays open after the speaker is turned off")
	}
}
