package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
)

// TestAPI_ClaimRules drives the JSON API as several users: claims are
// exclusive, asking again returns the same desktop, a full pool says so,
// and nobody touches another's desktop.
func TestAPI_ClaimRules(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops")

	var a, again, b desktop
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &a); code != 200 || a.Power != "running" || a.Holder != "alice" {
		t.Fatalf("alice's claim: %d %+v; want 200, running, held by alice", code, a)
	}
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &again); code != 200 || again.Name != a.Name {
		t.Fatalf("alice asking again: %d %s; want 200 and the same desktop %s", code, again.Name, a.Name)
	}
	if code := p.API(t, "bob", "POST", "/api/vdi/pools/local/demo/claim", &b); code != 200 || b.Name == a.Name {
		t.Fatalf("bob's claim: %d %s; want 200 and a desktop other than alice's %s", code, b.Name, a.Name)
	}
	p.API(t, "carol", "POST", "/api/vdi/pools/local/demo/claim", nil)
	var full apiError
	if code := p.API(t, "dave", "POST", "/api/vdi/pools/local/demo/claim", &full); code != http.StatusConflict ||
		!strings.Contains(full.Error, "No free desktops in pool demo") || full.Hint == "" {
		t.Errorf("claim from a full pool: %d %+v; want 409 saying no free desktops, with a hint", code, full)
	}
	var pools []pool
	p.API(t, "dave", "GET", "/api/vdi/pools", &pools)
	if len(pools) != 1 || pools[0].Free != 0 || pools[0].Size != 3 {
		t.Errorf("pools when full: %+v; want demo with 0 of 3 free", pools)
	}

	// What Prometheus scrapes says the same, and the alerts and dashboard
	// speak of what it scrapes and evaluate on it.
	t.Run("Metrics", func(t *testing.T) {
		families := scrapeMetrics(t, p)
		for _, tc := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"corral_vdi_claims_total", map[string]string{"result": "ok"}, 4}, // alice twice, bob, carol
			{"corral_vdi_claims_total", map[string]string{"result": "conflict"}, 1},
			{"corral_vdi_pool_members", map[string]string{"pool_namespace": "local", "pool": "demo", "state": "free"}, 0},
			{"corral_vdi_pool_members", map[string]string{"pool_namespace": "local", "pool": "demo", "state": "claimed"}, 3},
			{"corral_vdi_pool_size", map[string]string{"pool_namespace": "local", "pool": "demo"}, 3},
			{"corral_vdi_ready", map[string]string{}, 1},
			{"corral_vdi_apiserver_up", map[string]string{}, 1},
			{"corral_vdi_recordings_bytes", map[string]string{}, 0},
			{"corral_vdi_reclaims_total", map[string]string{"rule": "idle"}, 0},
			{"corral_vdi_reclaims_total", map[string]string{"rule": "lease-expired"}, 0},
			{"corral_vdi_reclaims_refused_total", map[string]string{"rule": "idle"}, 0},
			{"corral_vdi_reclaims_refused_total", map[string]string{"rule": "release"}, 0},
			{"corral_vdi_claim_races_lost_total", map[string]string{}, 0}, // three claims one after another
		} {
			if got, ok := gauge(families, tc.name, tc.labels); !ok || got != tc.want {
				t.Errorf("%s%v = %v (there: %v); want %v", tc.name, tc.labels, got, ok, tc.want)
			}
		}
		members := 0.0
		for _, pw := range []string{"stopped", "starting", "running", "stopping", "failed"} {
			n, _ := gauge(families, "corral_vdi_desktops", map[string]string{"pool_namespace": "local", "pool": "demo", "power": pw})
			members += n
		}
		if members != 3 {
			t.Errorf("corral_vdi_desktops of local/demo add up to %v; want its 3 members", members)
		}
		warm, _ := gauge(families, "corral_vdi_claims_won_total", map[string]string{"member": "warm"})
		cold, _ := gauge(families, "corral_vdi_claims_won_total", map[string]string{"member": "cold"})
		if warm+cold != 3 {
			t.Errorf("corral_vdi_claims_won_total: %v warm and %v cold; want alice's, bob's and carol's claims (asking again wins nothing)", warm, cold)
		}
		if max, _ := gauge(families, "corral_vdi_recordings_max_bytes", map[string]string{}); max <= 0 {
			t.Errorf("corral_vdi_recordings_max_bytes = %v; want the default cap", max)
		}
		if live, _ := gauge(families, "go_gc_heap_live_bytes", map[string]string{}); live <= 0 {
			t.Errorf("go_gc_heap_live_bytes = %v; want the heap the last collection found live (the soak's memory per session reads it)", live)
		}
		checkMonitoring(t, families)
		// The pool is full: a real Prometheus holds its alert pending
		// (for 15 minutes) and no other.
		evalMonitoring(t, p, map[string]map[string]string{"CorralVDIPoolExhausted": {"pool_namespace": "local", "pool": "demo"}})
	})

	for _, tc := range []struct {
		name, user, method, path string
		want                     int
	}{
		{"unknown pool", "alice", "POST", "/api/vdi/pools/local/nope/claim", 404},
		{"unknown namespace", "alice", "POST", "/api/vdi/pools/prod/demo/claim", 404},
		{"unknown member", "alice", "GET", "/api/vdi/desktops/local/nope", 404},
		{"another's desktop", "bob", "GET", "/api/vdi/desktops/local/" + a.Name, 403},
		{"another's connect", "bob", "GET", "/api/vdi/desktops/local/" + a.Name + "/connect", 403},
		{"another's release", "bob", "POST", "/api/vdi/desktops/local/" + a.Name + "/release", 403},
		{"another's stop", "bob", "POST", "/api/vdi/desktops/local/" + a.Name + "/stop", 403},
		{"all desktops, not admin", "bob", "GET", "/api/vdi/desktops?all=1", 403},
		{"not signed in", "", "GET", "/api/vdi/pools", 401},
		{"unknown route", "alice", "GET", "/api/vdi/nothing", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e apiError
			if code := p.API(t, tc.user, tc.method, tc.path, &e); code != tc.want || e.Error == "" || e.Hint == "" {
				t.Errorf("%s %s as %q: %d %+v; want %d with an error and a hint", tc.method, tc.path, tc.user, code, e, tc.want)
			}
		})
	}

	t.Run("console websocket of another's desktop is refused before upgrade", func(t *testing.T) {
		_, res, err := dialConsole(p, "bob", a.Name, p.URL)
		if err == nil || res == nil || res.StatusCode != 403 {
			t.Fatalf("bob's websocket to %s: err %v, response %v; want 403 before upgrade", a.Name, err, status(res))
		}
	})
	t.Run("console websocket from another origin is refused", func(t *testing.T) {
		_, res, err := dialConsole(p, "alice", a.Name, "http://evil.example")
		if err == nil || res == nil || res.StatusCode != 403 {
			t.Fatalf("cross-origin websocket: err %v, response %v; want 403", err, status(res))
		}
	})
	t.Run("holder's console websocket speaks RFB", func(t *testing.T) {
		ws, _, err := dialConsole(p, "alice", a.Name, p.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, msg, err := ws.ReadMessage()
		if err != nil || string(msg) != "RFB 003.008\n" {
			t.Fatalf("first message %q, %v; want the RFB 3.8 banner", msg, err)
		}
	})
	t.Run("cross-site form post is refused", func(t *testing.T) {
		req, _ := http.NewRequest("POST", p.URL+"/api/vdi/desktops/local/"+a.Name+"/release", nil)
		req.Header.Set("Tailscale-User-Login", "alice")
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 403 {
			t.Fatalf("cross-site release: %d; want 403", res.StatusCode)
		}
	})

	t.Run("a desktop whose processes died shows failed and stays claimed", func(t *testing.T) {
		killRecorded(t, p, a.Name, "Xvnc")
		var d desktop
		ok := eventually(5*time.Second, func() bool {
			p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.Name, &d)
			return d.Power == "failed"
		})
		if !ok || d.Holder != "alice" || strings.Contains(d.Reason, "Xvnc") {
			t.Fatalf("after killing Xvnc, as alice reads it: %+v; want failed in plain words, still held by alice", d)
		}
		p.API(t, "ops", "GET", "/api/vdi/desktops/local/"+a.Name, &d) // the diagnosis is an admin's
		if !strings.Contains(d.Reason, "Xvnc") {
			t.Fatalf("after killing Xvnc, as an admin reads it: %+v; want the reason naming Xvnc", d)
		}
		var e apiError
		if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.Name+"/connect", &e); code != 503 || e.Hint == "" {
			t.Errorf("connect to a failed desktop: %d %+v; want 503 with a hint", code, e)
		}
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Name != a.Name || d.Power != "running" {
			t.Errorf("claiming again after the failure: %d %+v; want %s running again", code, d, a.Name)
		}
	})

	t.Run("admin force-release frees it", func(t *testing.T) {
		if code := p.API(t, "ops", "POST", "/api/vdi/desktops/local/"+a.Name+"/release", nil); code != 200 {
			t.Fatalf("force-release: %d", code)
		}
		var d desktop
		if code := p.API(t, "dave", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Name != a.Name {
			t.Fatalf("dave's claim after force-release: %d %+v; want %s", code, d, a.Name)
		}
		var e apiError
		if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.Name, &e); code != 403 {
			t.Errorf("alice after force-release: %d; want 403", code)
		}
	})
}

// TestPortal_RestartReadoptsDesktops restarts the portal: the running
// desktop and its claim survive, nothing is started twice.
func TestPortal_RestartReadoptsDesktops(t *testing.T) {
	data, err := os.MkdirTemp("", "cvd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeData(data) })
	first := mustStartPortalIn(t, data, "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=false")
	var d desktop
	if code := first.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	pid := recordedPID(t, first, d.Name, "Xvnc")
	first.Stop(t)
	if !alive(pid) {
		t.Fatalf("Xvnc %d of %s died with the portal; desktops should outlive a restart", pid, d.Name)
	}

	second := mustStartPortalIn(t, data)
	var after desktop
	if code := second.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d.Name, &after); code != 200 || after.Power != "running" || after.Holder != "alice" {
		t.Fatalf("after restart: %d %+v; want running and still alice's", code, after)
	}
	if got := recordedPID(t, second, d.Name, "Xvnc"); got != pid {
		t.Errorf("Xvnc pid after restart %d; want the adopted %d", got, pid)
	}
	ws, _, err := dialConsole(second, "alice", d.Name, second.URL)
	if err != nil {
		t.Fatalf("console after restart: %v", err)
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "RFB 003.008\n" {
		t.Errorf("console after restart: %q %v; want the RFB banner", msg, err)
	}
	ws.Close()
	second.Stop(t) // stops desktops on exit
	if alive(pid) {
		t.Errorf("Xvnc %d still alive after the portal stopped its desktops", pid)
	}
}

// TestPortal_TwoSideBySide runs two portals on one machine: each runs its
// own desktops and never touches the other's.
func TestPortal_TwoSideBySide(t *testing.T) {
	one, two := MustStartPortal(t), MustStartPortal(t)
	var d1, d2 desktop
	one.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d1)
	two.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d2)
	if d1.Power != "running" || d2.Power != "running" {
		t.Fatalf("claims: %+v, %+v; want both running", d1, d2)
	}
	pid2 := recordedPID(t, two, d2.Name, "Xvnc")
	if code := one.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d1.Name+"/release", nil); code != 200 {
		t.Fatalf("release on the first portal: %d", code)
	}
	one.Stop(t)
	if !alive(pid2) {
		t.Fatalf("the second portal's Xvnc died when the first released and stopped")
	}
	var still desktop
	if two.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d2.Name, &still); still.Power != "running" {
		t.Errorf("second portal's desktop: %+v; want running", still)
	}
}

// dialConsole opens the VNC console websocket of member as user, sending
// origin as the Origin header.
func dialConsole(p *Portal, user, member, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Tailscale-User-Login", user)
	h.Set("Origin", origin)
	url := "ws" + strings.TrimPrefix(p.URL, "http") + "/ws/vnc/local/" + member
	return websocket.DefaultDialer.Dial(url, h)
}

// recordedPID returns the PID the local backend recorded for one of a
// member's processes.
func recordedPID(tb testing.TB, p *Portal, member, name string) int {
	tb.Helper()
	pid, _ := recordedProc(tb, p, member, name)
	return pid
}

// recordedProc returns the pid and start time (clock ticks since boot)
// the portal recorded for member's process name.
func recordedProc(tb testing.TB, p *Portal, member, name string) (int, uint64) {
	tb.Helper()
	// A sandboxed desktop's pids file is in the portal's state folder.
	buf, err := os.ReadFile(filepath.Join(p.DataDir, "local", "members", member, "state", "pids"))
	if errors.Is(err, fs.ErrNotExist) {
		buf, err = os.ReadFile(filepath.Join(p.DataDir, "local", "members", member, "run", "pids"))
	}
	if err != nil {
		tb.Fatal(err)
	}
	var pids struct {
		Procs []struct {
			Name  string `json:"name"`
			PID   int    `json:"pid"`
			Start uint64 `json:"start"`
		} `json:"procs"`
	}
	if err := json.Unmarshal(buf, &pids); err != nil {
		tb.Fatal(err)
	}
	for _, pr := range pids.Procs {
		if pr.Name == name {
			return pr.PID, pr.Start
		}
	}
	tb.Fatalf("no %s in %s's pids file: %s", name, member, buf)
	return 0, 0
}

// killRecorded kills member's recorded process name with SIGKILL and
// returns its pid. It signals through a pidfd taken while the pid's start
// time is still the recorded one, so a recycled pid is never hit.
func killRecorded(tb testing.TB, p *Portal, member, name string) int {
	tb.Helper()
	pid, start := recordedProc(tb, p, member, name)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		tb.Fatalf("%s's %s (pid %d): %v", member, name, pid, err)
	}
	defer unix.Close(fd)
	_, f, err := procStat(pid)
	if err != nil {
		tb.Fatal(err)
	}
	if len(f) < 20 || f[19] != fmt.Sprint(start) {
		tb.Fatalf("pid %d is no longer %s's %s (another process has it)", pid, member, name)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		tb.Fatal(err)
	}
	return pid
}

func status(res *http.Response) any {
	if res == nil {
		return nil
	}
	return res.Status
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	_, f, err := procStat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}
