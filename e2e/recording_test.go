package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/relay"
)

// recordedPool makes pool name of one session desktop, recorded, and
// claims its member for user.
func recordedPool(t *testing.T, p *Portal, name, user string) desktop {
	t.Helper()
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "`+name+`", "size": 1, "policy": {"record": true}}`, nil); code != 201 {
		t.Fatalf("create recorded pool: %d", code)
	}
	var d desktop
	if code := p.API(t, user, "POST", "/api/vdi/pools/local/"+name+"/claim", &d); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	return d
}

// recordings lists the recordings of member as the admin, waiting until
// want of them have ended.
func recordings(t *testing.T, p *Portal, member string, want int) map[string]api.Recording {
	t.Helper()
	out := map[string]api.Recording{}
	waitFor(t, 15*time.Second, "recordings to end", func() bool {
		var rows []api.Recording
		if code := p.API(t, "ops", "GET", "/api/vdi/recordings?desktop=local/"+member, &rows); code != 200 {
			t.Fatalf("list recordings: %d", code)
		}
		clear(out)
		for _, r := range rows {
			if r.End != nil {
				out[r.Protocol] = r
			}
		}
		return len(out) >= want
	})
	return out
}

// download fetches a recording as user and returns its status, type and body.
func download(t *testing.T, p *Portal, user, id string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", p.URL+"/api/vdi/recordings/"+id, nil)
	req.Header.Set("Tailscale-User-Login", user)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), body
}

// TestRecording_TerminalAndVNC is issue 19's proof: on a recorded pool RDP
// is not offered and the user sees the notice; a terminal session with a
// typed command and a VNC session with real pixels each leave a recording
// that an admin lists, downloads (the asciicast holds the command's output)
// and plays in Chromium, the VNC one to the same final framebuffer as the
// live session; a non-admin is refused; every playback and download is in
// the audit log.
func TestRecording_TerminalAndVNC(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	d := recordedPool(t, p, "exam", "alice")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))

	t.Run("RDP is not offered", func(t *testing.T) {
		var info struct {
			connectInfo
			Recorded bool   `json:"recorded"`
			Notice   string `json:"notice"`
		}
		if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d.Name+"/connect", &info); code != 200 {
			t.Fatalf("connect: %d", code)
		}
		if got := strings.Join(info.protocols(), ","); got != "vnc,terminal" || !info.Recorded || !strings.Contains(info.Notice, "RDP") {
			t.Errorf("connect = %s, recorded %v, notice %q; want vnc,terminal, recorded, saying why no RDP", got, info.Recorded, info.Notice)
		}
		if slices := strings.Join(d.Protocols, ","); strings.Contains(slices, "rdp") {
			t.Errorf("desktop protocols = %s; want no rdp", slices)
		}
		_, res, err := dialWS(p, "alice", "/ws/rdp/local/"+d.Name, p.URL)
		if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Errorf("RDP websocket on a recorded desktop: %v %v; want 403", res, err)
		}
	})

	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=terminal")
	must(t, expect.Locator(page.GetByTestId("recording-notice")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, page.GetByTestId("xterm").Click())
	must(t, page.Keyboard().Type("echo recorded-$((6*7))\n"))
	waitXterm(t, page, regexp.MustCompile(`(?m)^recorded-42`), 10*time.Second)
	screenshot(t, page, "terminal-with-notice")

	// The VNC console: type into the desktop's xterm window, so the pixels
	// are the session's own, then take the live framebuffer.
	if _, err := page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=vnc"); err != nil {
		t.Fatal(err)
	}
	must(t, expect.Locator(page.GetByTestId("recording-notice")).ToBeVisible())
	drawn(t, page, "vnc")
	must(t, page.Locator("#screen canvas").Click())
	must(t, page.Keyboard().Type("echo pixels-$((7*6))\n"))
	time.Sleep(time.Second)
	live := stableCanvas(t, page, "#screen canvas")
	screenshot(t, page, "vnc-live")
	must(t, page.Close())

	recs := recordings(t, p, d.Name, 2)
	term, vnc := recs["terminal"], recs["vnc"]
	t.Logf("recordings: terminal %s %d bytes, vnc %s %d bytes", term.ID, term.Bytes, vnc.ID, vnc.Bytes)

	t.Run("download", func(t *testing.T) {
		code, ctype, body := download(t, p, "ops", term.ID)
		if code != 200 || ctype != "application/x-asciicast" || term.Format != "asciicast-v2" || int64(len(body)) != term.Bytes {
			t.Fatalf("download terminal = %d %s, %d bytes; want 200 application/x-asciicast, %d bytes", code, ctype, len(body), term.Bytes)
		}
		var hdr struct{ Version int }
		first, _, _ := strings.Cut(string(body), "\n")
		if out := castOutput(t, body); json.Unmarshal([]byte(first), &hdr) != nil || hdr.Version != 2 || !strings.Contains(out, "recorded-42\r\n") {
			t.Errorf("asciicast header %q, output %q; want version 2 with the command's output recorded-42", first, out)
		}
		if strings.Contains(string(body), `"i", "echo`) {
			t.Error("keystrokes recorded without recordInput")
		}
		code, _, body = download(t, p, "ops", vnc.ID)
		if code != 200 || !bytes.HasPrefix(body, []byte("CORRAL-RFB 1\n")) || !bytes.Contains(body, []byte("RFB 003.008\n")) {
			t.Errorf("download vnc = %d, %q...; want a corral-rfb-v1 file from the handshake on", code, body[:min(len(body), 40)])
		}
		info, err := os.Stat(filepath.Join(p.DataDir, "recordings", vnc.ID+".rfb"))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("recording file: %v, %v; want mode 0600 under recordings/", info, err)
		}
	})

	t.Run("the kiosk, console and home pages say so", func(t *testing.T) {
		for _, u := range []string{"/kiosk/exam", "/desktops/local/" + d.Name, "/"} {
			req, _ := http.NewRequest("GET", p.URL+u, nil)
			req.Header.Set("Tailscale-User-Login", "alice")
			res, err := http.DefaultClient.Do(req)
			must(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(body), `data-testid="recording-notice"`) && !strings.Contains(string(body), `data-testid="pool-recorded"`) {
				t.Errorf("GET %s = %d without the server-rendered recording notice", u, res.StatusCode)
			}
		}
	})

	t.Run("a non-admin is refused", func(t *testing.T) {
		if code := p.API(t, "alice", "GET", "/api/vdi/recordings", nil); code != 403 {
			t.Errorf("alice lists recordings: %d; want 403", code)
		}
		if code, _, _ := download(t, p, "alice", term.ID); code != 403 {
			t.Errorf("alice downloads her own recording: %d; want 403", code)
		}
		if code := get(t, p.URL+"/admin/recordings/"+term.ID, signInByName(t, p, "alice")); code != 403 {
			t.Errorf("alice opens the playback page: %d; want 403", code)
		}
	})

	admin := b.MustNewPage(t, 1280, 900)
	must(t, admin.AddInitScript(playwright.Script{Content: playwright.String(cspWatch)}))
	var mu sync.Mutex
	var console []string
	admin.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" {
			mu.Lock()
			console = append(console, m.Text())
			mu.Unlock()
		}
	})
	signIn(t, admin, p, "ops", "/admin/history")
	must(t, expect.Locator(admin.GetByTestId("session-recording").First()).ToBeVisible())

	t.Run("the dashboard lists them", func(t *testing.T) {
		if _, err := admin.Goto(p.URL + "/admin"); err != nil {
			t.Fatal(err)
		}
		must(t, admin.GetByTestId("recordings-link").Click())
		must(t, expect.Locator(admin.GetByTestId("recording")).ToHaveCount(2))
		screenshot(t, admin, "recordings")
	})

	t.Run("terminal plays in Chromium", func(t *testing.T) {
		if _, err := admin.Goto(p.URL + "/admin/recordings/" + term.ID); err != nil {
			t.Fatal(err)
		}
		player := admin.GetByTestId("player")
		must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
		_, err := admin.GetByTestId("speed").SelectOption(playwright.SelectOptionValues{Values: &[]string{"16"}})
		must(t, err)
		must(t, admin.GetByTestId("play").Click())
		must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
		must(t, expect.Locator(player).ToContainText("recorded-42"))
		screenshot(t, admin, "terminal-playback")
	})

	t.Run("VNC replays to the live framebuffer", func(t *testing.T) {
		if _, err := admin.Goto(p.URL + "/admin/recordings/" + vnc.ID); err != nil {
			t.Fatal(err)
		}
		player := admin.GetByTestId("player")
		must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
		// Before Play the player shows the session's first frame, not an
		// empty canvas.
		poster := stableCanvas(t, admin, "#player canvas")
		screenshot(t, admin, "vnc-playback-poster")
		if n, all := unlikeCorner(poster); n*100 < all {
			t.Errorf("before Play the player shows %d of %d pixels unlike its corner; want the first frame (at least 1%%)", n, all)
		}
		must(t, admin.GetByTestId("play").Click())
		time.Sleep(1500 * time.Millisecond)
		screenshot(t, admin, "vnc-playing")
		// Seek to the end through the timeline.
		_, err := admin.GetByTestId("timeline").Evaluate(`(el) => { el.value = el.max; el.dispatchEvent(new Event('change')); }`, nil)
		must(t, err)
		must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
		replayed := stableCanvas(t, admin, "#player canvas")
		tm, _ := admin.GetByTestId("time").TextContent()
		mx, _ := admin.GetByTestId("timeline").GetAttribute("max")
		t.Logf("replayed %s (timeline max %s) of the VNC session", tm, mx)
		if pos, total, ok := strings.Cut(tm, " / "); !ok || pos != total || strings.Trim(total, "0:.") == "" {
			t.Errorf("the player's clock at the end reads %q; want the recording's length twice, not zero (timeline max %s)", tm, mx)
		}
		screenshot(t, admin, "vnc-playback-end")
		if n := differingPixels(live, replayed); n != 0 {
			t.Errorf("replayed framebuffer %v differs from the live one %v in %d pixels", replayed.Bounds(), live.Bounds(), n)
		}
	})

	t.Run("a first screen recorded in pieces still makes the poster", func(t *testing.T) {
		posterOfSplitFrame(t, admin, p.URL+"/admin/recordings/"+vnc.ID)
	})

	if errs := cspViolations(t, admin, &console, &mu); len(errs) > 0 {
		t.Errorf("the playback pages logged errors or CSP violations: %q", errs)
	}
	for _, want := range []struct{ action, id string }{
		{"recording-play", term.ID}, {"recording-play", vnc.ID}, {"recording-download", term.ID}, {"recording-download", vnc.ID},
	} {
		if !auditHas(t, p, "user=ops", "ops", want.action, want.id) {
			t.Errorf("audit log has no %s of %s", want.action, want.id)
		}
	}
}

// TestRecording_SizeCapEndsTheSession fills a tiny size cap: the session
// ends with the reason, its history is complete, the next console is
// refused; a recording in progress when the portal dies is a closed,
// playable file after its restart.
func TestRecording_SizeCapEndsTheSession(t *testing.T) {
	data, err := os.MkdirTemp("", "cvd")
	must(t, err)
	t.Cleanup(func() { removeData(data) })
	env := []string{"CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_RECORDING_MAX_BYTES=16KiB",
		"CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER=off"} // the whole cap for one user: TestAttack_RecordingsShare has the share
	p := mustStartPortalIn(t, data, env...)
	d := recordedPool(t, p, "exam", "alice")
	outer := t // the restarted portal outlives the subtest

	t.Run("a crash leaves a playable recording", func(t *testing.T) {
		ws, _, err := dialWS(p, "alice", "/ws/terminal/local/"+d.Name, p.URL)
		must(t, err)
		ws.WriteMessage(websocket.TextMessage, []byte("echo before-$((40+2))\r"))
		readUntilWS(t, ws, "before-42", 10*time.Second)
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		ws.Close()
		p = mustStartPortalIn(outer, data, env...)
		recs := recordings(t, p, d.Name, 1)
		code, _, body := download(t, p, "ops", recs["terminal"].ID)
		if code != 200 || !strings.Contains(string(body), "before-42") || !strings.HasSuffix(string(body), "]\n") {
			t.Errorf("recording after the crash: %d %q; want it closed at a complete event, with the output", code, body)
		}
	})

	t.Run("recordInput records keystrokes", func(t *testing.T) {
		if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "keys", "size": 1, "policy": {"record": true, "recordInput": true}}`, nil); code != 201 {
			t.Fatalf("create pool: %d", code)
		}
		k := mustClaim(t, p, "bob", "keys")
		ws, _, err := dialWS(p, "bob", "/ws/terminal/local/"+k.Name, p.URL)
		must(t, err)
		ws.WriteMessage(websocket.TextMessage, relay.ResizeMessage(relay.Resize{Cols: 100, Rows: 30}))
		ws.WriteMessage(websocket.TextMessage, []byte("echo typed-$((3*3))\r"))
		readUntilWS(t, ws, "typed-9", 10*time.Second)
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		ws.Close()
		_, _, body := download(t, p, "ops", recordings(t, p, k.Name, 1)["terminal"].ID)
		for _, want := range []string{`"i", "echo typed-$((3*3))\r"`, `"r", "100x30"`, `"o", "`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("asciicast has no %s:\n%s", want, body)
			}
		}
	})

	t.Run("a full cap ends the session with the reason", func(t *testing.T) {
		// The restart after the crash stopped the desktops the killed
		// portal left (CORRAL_VDI_STOP_DESKTOPS_ON_EXIT): alice starts hers.
		if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/start", nil); code != 200 {
			t.Fatalf("start alice's desktop again: %d", code)
		}
		page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=terminal")
		expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		must(t, page.GetByTestId("xterm").Click())
		must(t, page.Keyboard().Type("seq 1 100000\n"))
		must(t, expect.Locator(page.GetByTestId("status")).ToContainText("its recording could not be written: recordings reached their size cap"))
		must(t, expect.Locator(page.GetByTestId("reconnect")).ToBeHidden())
		screenshot(t, page, "size-cap")
		text, _ := page.GetByTestId("status").TextContent()
		t.Logf("the user sees: %q", text)
		var sessions []struct {
			ID          string `json:"id"`
			Closed      string `json:"closed"`
			BytesOut    int64  `json:"bytesOut"`
			CloseReason string `json:"closeReason"`
		}
		waitFor(t, 10*time.Second, "the session closed in the history", func() bool {
			p.API(t, "ops", "GET", "/api/vdi/history/sessions?user=alice&limit=1", &sessions)
			return len(sessions) == 1 && sessions[0].Closed != ""
		})
		if s := sessions[0]; !strings.Contains(s.CloseReason, "size cap") || s.BytesOut == 0 {
			t.Errorf("history = %+v; want the reason and the bytes", s)
		}
		var rows []api.Recording
		p.API(t, "ops", "GET", "/api/vdi/recordings?user=alice", &rows)
		var total int64
		for _, r := range rows {
			total += r.Bytes
		}
		if len(rows) != 2 || total > 16<<10 {
			t.Errorf("recordings = %d, %d bytes; want 2 within the 16 KiB cap", len(rows), total)
		}
		_, res, err := dialWS(p, "alice", "/ws/terminal/local/"+d.Name, p.URL)
		if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a console on full recordings: %v %v; want 503", res, err)
		}
	})
}

// TestRecording_SerialConsole records a QEMU member's serial console on a
// recorded pool: the login and a command's output are in the asciicast,
// the password typed (never echoed, keystrokes not recorded) is not.
func TestRecording_SerialConsole(t *testing.T) {
	img := vmImage(t)
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_DEMO_VM_POOL_SIZE=1", "CORRAL_VDI_VM_IMAGE="+img)
	if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/demo-vm", `{"policy": {"record": true}}`, nil); code != 200 {
		t.Fatalf("record demo-vm: %d", code)
	}
	start := time.Now()
	d := claimVM(t, p, "alice")
	page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
	serialLogin(t, page, p, "alice", d.Name, start)
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(page.GetByTestId("recording-notice")).ToBeVisible())
	creds, _ := page.GetByTestId("screen").GetAttribute("data-credentials")
	_, password, _ := strings.Cut(creds, ":")
	must(t, page.Close())

	serial := recordings(t, p, d.Name, 2)["serial"]
	code, ctype, body := download(t, p, "ops", serial.ID)
	out := castOutput(t, body) // a serial line's output comes a few bytes at a time
	if code != 200 || ctype != "application/x-asciicast" || !strings.Contains(out, "vm-42\r\n") || !strings.Contains(out, "corral-vm login") {
		t.Errorf("serial recording = %d %s; want an asciicast with the login prompt and vm-42:\n%s", code, ctype, out)
	}
	if password == "" || strings.Contains(out, password) {
		t.Errorf("the serial recording holds the password %q (or the page showed none)", password)
	}
}

// castOutput returns the output events of an asciicast, joined.
func castOutput(t *testing.T, cast []byte) string {
	t.Helper()
	var out strings.Builder
	for i, line := range strings.Split(strings.TrimSpace(string(cast)), "\n") {
		var ev [3]any
		if i == 0 {
			continue
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("asciicast line %d %q: %v", i, line, err)
		}
		if ev[1] == "o" {
			out.WriteString(ev[2].(string))
		}
	}
	return out.String()
}
