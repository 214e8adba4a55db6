package soak

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
)

// localPhase runs the embedded default: a portal on the local backend with
// real desktops (Xvnc, freerdp-shadow, a pty terminal each), console load
// through its websocket relay, and a desktop process killed.
func localPhase(t *testing.T, sc scale, r *report) {
	data, _ := os.MkdirTemp("", "cvl") // short: desktops' sockets live under it
	t.Cleanup(func() { os.RemoveAll(data) })
	// The recordings' disk is small, for the disk-full fault.
	recDisk := filepath.Join(data, "recordings")
	os.MkdirAll(recDisk, 0o700)
	mountErr := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", recDisk).Run()
	if mountErr == nil {
		t.Cleanup(func() { exec.Command("umount", recDisk).Run() }) // after the portal stops
	}
	p := startPortal(t, data, "127.0.0.1:0", "CORRAL_VDI_BACKEND=local", "CORRAL_VDI_ADMINS=ops",
		fmt.Sprintf("CORRAL_VDI_DEMO_POOL_SIZE=%d", sc.Desktops+1), "CORRAL_VDI_MAX_CONSOLES_PER_USER=0",
		"CORRAL_VDI_RECORDING_DISK_RESERVE=1MiB") // the 4 MiB recordings disk below: the default reserve (64 MiB at least) would refuse at once
	ctx := context.Background()
	var holders []string // user:member
	for i := range sc.Desktops {
		user := fmt.Sprintf("load%d", i)
		code, buf, err := call(ctx, p.URL, user, "POST", "/api/vdi/pools/local/demo/claim", "")
		d, _ := decode[desktop](buf)
		if code != 200 || d.Power != "running" {
			r.add("load", "real local desktops claimed", false, "200 running", "%d %.200s %v", code, buf, err)
			return
		}
		holders = append(holders, user+":"+d.Name)
	}
	// The web-trust attack table runs at the same time, against a portal
	// of its own (e2e/attack_test.go starts it): the machine is under the
	// soak's load while every attack must still be refused.
	attacks := make(chan error, 1)
	var attackOut []byte
	attackStart := time.Now()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
		defer cancel()
		// The MCP conformance suite is no attack; make test runs it.
		cmd := exec.CommandContext(cctx, "go", "test", "-count=1", "-run", "^TestAttack", "-skip", "^TestAttack_MCP$/^Conformance$", "./e2e/")
		cmd.Dir = ".."
		var err error
		attackOut, err = cmd.CombinedOutput()
		attacks <- err
	}()
	consoleLoad(t, sc, r, p, holders)
	err := <-attacks
	tail := strings.Split(strings.TrimSpace(string(attackOut)), "\n")
	if err != nil { // name what failed, and keep the whole output for reading
		var failed []string
		for _, line := range tail {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "--- FAIL") || strings.Contains(l, ".go:") && !strings.Contains(l, "refused") {
				failed = append(failed, l)
			}
		}
		out := filepath.Join(os.TempDir(), "soak-e2e-attacks.log")
		os.WriteFile(out, attackOut, 0o644)
		tail = append(failed, "(all of it in "+out+")")
	}
	r.add("attack", "e2e attack table and desktop escapes (root and nobody) under load", err == nil, "every attack refused (go test passes)", "%s in %s",
		strings.Join(tail[max(0, len(tail)-6):], " / "), time.Since(attackStart).Round(time.Second))
	desktopKilled(t, sc, r, p)
	recordingsFull(r, p, mountErr, holders[0])
}

// session is one terminal console through the portal.
type session struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	rtts []time.Duration
	in   atomic.Int64 // bytes from the desktop
	err  error
}

// dialTerminal opens member's terminal websocket as user.
func dialTerminal(base, user, member string) (*websocket.Conn, error) {
	return dialTerminalIn(base, user, "local", member)
}

// dialTerminalIn opens ns/member's terminal websocket as user.
func dialTerminalIn(base, user, ns, member string) (*websocket.Conn, error) {
	return dialConsole(base, user, "/ws/terminal/"+ns+"/"+member)
}

// dialConsole opens the console websocket at path as user, the error
// naming the handshake's status.
func dialConsole(base, user, path string) (*websocket.Conn, error) {
	ws, res, err := websocketDial(base, user, path)
	if err != nil {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		return nil, fmt.Errorf("dial %s: %d %w", path, code, err)
	}
	return ws, nil
}

// websocketDial opens path as user (a Tailscale identity from loopback),
// returning the handshake's response too.
func websocketDial(base, user, path string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Tailscale-User-Login", user)
	h.Set("Origin", base)
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+path, h)
}

// echoOnce types one command on ws and reports whether its output comes
// back within d.
func echoOnce(ws *websocket.Conn, tok string, d time.Duration) error {
	ws.SetReadDeadline(time.Now().Add(d))
	defer ws.SetReadDeadline(time.Time{})
	if err := ws.WriteMessage(websocket.BinaryMessage, fmt.Appendf(nil, "echo %s=$((6*7))\n", tok)); err != nil {
		return err
	}
	var out bytes.Buffer
	for !bytes.Contains(out.Bytes(), []byte(tok+"=42")) {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return fmt.Errorf("no %s=42 in %q: %w", tok, out.String(), err)
		}
		out.Write(msg)
	}
	return nil
}

// echoLoop types "echo <token>" every period and times until the token
// comes back, until end; it reports the first error (a dropped session).
func (s *session) echoLoop(id int, period time.Duration, end time.Time) {
	var out bytes.Buffer
	got := make(chan struct{}, 1)
	var want atomic.Value
	want.Store("")
	go func() {
		for {
			_, msg, err := s.ws.ReadMessage()
			if err != nil {
				return
			}
			s.in.Add(int64(len(msg)))
			out.Write(msg)
			if w := want.Load().(string); w != "" && bytes.Contains(out.Bytes(), []byte(w)) {
				out.Reset()
				select {
				case got <- struct{}{}:
				default:
				}
			}
			if out.Len() > 1<<16 {
				out.Reset()
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // the shell's prompt
	for n := 0; time.Now().Before(end); n++ {
		// The token is printed by the shell, not echoed as typed: $((...)).
		tok := fmt.Sprintf("t%d-%d", id, n)
		want.Store(fmt.Sprintf("%s=%d", tok, n+1))
		t0 := time.Now()
		if err := s.ws.WriteMessage(websocket.BinaryMessage, fmt.Appendf(nil, "echo %s=$((%d+1))\n", tok, n)); err != nil {
			s.err = err
			return
		}
		select {
		case <-got:
			s.mu.Lock()
			s.rtts = append(s.rtts, time.Since(t0))
			s.mu.Unlock()
		case <-time.After(15 * time.Second):
			s.err = fmt.Errorf("session %d: no answer to %s in 15 s", id, tok)
			return
		}
		time.Sleep(period)
	}
}

// consoleLoad holds sc.Sessions console sessions on the real desktops for
// sc.LoadFor: a quarter VNC (each desktop's holder and admins watching
// alongside), each asking for a tile of pixels every 200 ms, the rest
// terminals, each typing a command every 200 ms.
func consoleLoad(t *testing.T, sc scale, r *report, p *portal, holders []string) {
	base := directEcho(t, 20)
	nVNC := sc.Sessions / 4
	_, first, _ := strings.Cut(holders[0], ":")
	vncBase, vncBaseErr := directVNC(filepath.Join(p.Data, "local", "members", first, "run", "vnc.sock"), 20)
	pid := p.cmd.Process.Pid
	rss0, cpu0 := rssKiB(pid), cpuTime(pid)
	live0, _, live0Err := liveHeap(context.Background(), p)
	var vncs []*vncSession
	for i := range nVNC {
		// One console per desktop is its holder's (a second one would take
		// it over); the others are an admin watching alongside.
		user, member, _ := strings.Cut(holders[i%len(holders)], ":")
		if i >= len(holders) {
			user = "ops"
		}
		s, err := openVNC(p.URL, user, member)
		if err != nil {
			r.add("load", fmt.Sprintf("%d VNC sessions open", nVNC), false, "all open", "%d open: %v", i, err)
			for _, s := range vncs {
				s.ws.Close()
			}
			return
		}
		vncs = append(vncs, s)
	}
	var sessions []*session
	for i := range sc.Sessions - nVNC {
		user, member, _ := strings.Cut(holders[i%len(holders)], ":")
		ws, err := dialTerminal(p.URL, user, member)
		if err != nil {
			r.add("load", fmt.Sprintf("%d terminal sessions open", sc.Sessions), false, "all open", "%d open: %v", i, err)
			for _, s := range sessions {
				s.ws.Close()
			}
			for _, s := range vncs {
				s.ws.Close()
			}
			return
		}
		sessions = append(sessions, &session{ws: ws})
	}
	time.Sleep(time.Second)
	rss1 := rssKiB(pid)
	_, opened, openedErr := liveHeap(context.Background(), p)
	start := time.Now()
	end := start.Add(sc.LoadFor)
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() { s.echoLoop(i, 200*time.Millisecond, end) })
	}
	for i, s := range vncs {
		wg.Go(func() { s.loop(i, 200*time.Millisecond, end) })
	}
	wg.Wait()
	took := time.Since(start)
	cpu1, rss2 := cpuTime(pid), rssKiB(pid)
	// What the sessions hold is the heap a collection finds live while
	// they are all open: the RSS also holds garbage not yet collected
	// (the heap grows to twice what is live first), which made the RSS
	// figure swing across the budget from run to run.
	live1, waited, live1Err := liveHeapAfter(context.Background(), p, opened)
	var all []time.Duration
	var bytesIn int64
	dropped := 0
	var firstErr error
	for _, s := range sessions {
		all = append(all, s.rtts...)
		bytesIn += s.in.Load()
		if s.err != nil {
			dropped++
			if firstErr == nil {
				firstErr = s.err
			}
		}
		s.ws.Close()
	}
	r.add("load", fmt.Sprintf("%d terminal sessions on %d real desktops, %s", len(sessions), len(holders), sc.LoadFor), dropped == 0,
		"0 dropped", "%d dropped, %d commands answered %s", dropped, len(all), errOr(firstErr, ""))
	vncLoadReport(r, vncs, len(holders), sc.LoadFor, took, vncBase, vncBaseErr)
	p50, p99 := percentile(all, 50), percentile(all, 99)
	r.add("load", "command round trip p50 / p99 (through portal)", p99 < 2*time.Second, "p99 < 2 s", "%s / %s", ms(p50), ms(p99))
	r.add("load", "added latency p50 vs a pty on the host", p50-base < 500*time.Millisecond, "< 500 ms", "%s (direct pty p50 %s)", ms(p50-base), ms(base))
	r.add("load", "throughput desktop -> client", bytesIn > 0, "> 0", "%.1f KiB/s in all", float64(bytesIn)/1024/took.Seconds())
	n := float64(len(sessions) + len(vncs))
	cpuPer := (cpu1 - cpu0).Seconds() / took.Seconds() / n * 100
	r.add("load", "portal CPU per session", cpuPer < 5, "< 5 % of a core", "%.2f %% of a core", cpuPer)
	rssPer := float64(max(rss1, rss2)-rss0) / n
	if err := cmp.Or(live0Err, openedErr, live1Err); err != nil {
		r.add("load", "portal memory per session (live heap)", false, "< 1 MiB", "not read: %v", err)
		return
	}
	memPer := (live1 - live0) / 1024 / n
	r.add("load", "portal memory per session (live heap)", memPer < 1024, "< 1 MiB",
		"%.0f KiB (live heap %.1f -> %.1f MiB, collected %s after the load; RSS %.0f KiB a session)",
		memPer, live0/(1<<20), live1/(1<<20), waited.Round(100*time.Millisecond), rssPer)
}

// directEcho measures the same command round trip on a pty shell started
// here, without the portal: the baseline of "added latency".
func directEcho(t *testing.T, n int) time.Duration {
	cmd := exec.Command("sh")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PS1=$ "}
	f, err := pty.Start(cmd)
	if err != nil {
		return 0
	}
	defer func() { f.Close(); cmd.Process.Kill(); cmd.Wait() }()
	var rtts []time.Duration
	buf := make([]byte, 4096)
	var acc bytes.Buffer
	for i := range n {
		want := fmt.Sprintf("d%d=%d", i, i+1)
		t0 := time.Now()
		fmt.Fprintf(f, "echo d%d=$((%d+1))\n", i, i)
		f.SetReadDeadline(time.Now().Add(5 * time.Second))
		for !bytes.Contains(acc.Bytes(), []byte(want)) {
			k, err := f.Read(buf)
			if err != nil {
				return percentile(rtts, 50)
			}
			acc.Write(buf[:k])
		}
		acc.Reset()
		rtts = append(rtts, time.Since(t0))
	}
	return percentile(rtts, 50)
}

// desktopKilled kills a claimed desktop's Xvnc: the member shows failed
// with a reason, its holder gets a clear refusal to connect, and an admin
// recreates it.
func desktopKilled(t *testing.T, sc scale, r *report, p *portal) {
	ctx := context.Background()
	code, buf, _ := call(ctx, p.URL, "victim", "POST", "/api/vdi/pools/local/demo/claim", "")
	d, _ := decode[desktop](buf)
	if code != 200 {
		r.add("fault", "desktop killed: claim", false, "200", "%d %.200s", code, buf)
		return
	}
	pid := recordedPID(p, d.Name, "Xvnc")
	if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		r.add("fault", "desktop killed: Xvnc found", false, "pid", "none for %s", d.Name)
		return
	}
	path := "/api/vdi/desktops/local/" + d.Name
	took, ok := eventually(15*time.Second, func() bool {
		_, buf, _ := call(ctx, p.URL, "victim", "GET", path, "")
		d, _ = decode[desktop](buf)
		return d.Power == "failed"
	})
	r.add("fault", "desktop killed: member shows failed", ok && d.Holder == "victim" && d.Reason != "", "failed, held, a reason, within 15 s",
		"%s after %s: %q", d.Power, took.Round(100*time.Millisecond), d.Reason)
	code, buf, _ = call(ctx, p.URL, "victim", "GET", path+"/connect", "")
	e, _ := decode[struct{ Error, Hint string }](buf)
	r.add("fault", "desktop killed: holder gets a clear message", code == 503 && e.Hint != "", "503 with a hint", "%d %q", code, e.Error)
	// The admin's way out: force-release (the holder is told), recreate,
	// and the member is claimable and runs again.
	rel, _, _ := call(ctx, p.URL, "ops", "POST", path+"/release", `{"reason":"soak: its desktop died"}`)
	code, _, _ = call(ctx, p.URL, "ops", "POST", path+"/recreate", "")
	took, ok = eventually(60*time.Second, func() bool {
		c, b, _ := call(ctx, p.URL, "victim", "POST", "/api/vdi/pools/local/demo/claim", "")
		d, _ = decode[desktop](b)
		return c == 200 && d.Power == "running"
	})
	r.add("fault", "desktop killed: admin force-releases, recreates", rel == 200 && code == 200 && ok, "200, 200, claimed running within 60 s",
		"%d, %d, %s %s after %s", rel, code, d.Name, d.Power, took.Round(100*time.Millisecond))
}

// recordedPID returns the pid the local backend recorded for a desktop's
// process name, 0 when none.
func recordedPID(p *portal, member, name string) int {
	// The portal keeps it in the member's state folder (root's) when
	// desktops run as their own uids, else in its run folder.
	dir := filepath.Join(p.Data, "local", "members", member)
	buf, err := os.ReadFile(filepath.Join(dir, "state", "pids"))
	if err != nil {
		if buf, err = os.ReadFile(filepath.Join(dir, "run", "pids")); err != nil {
			return 0
		}
	}
	var pids struct {
		Procs []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		} `json:"procs"`
	}
	json.Unmarshal(buf, &pids)
	for _, pr := range pids.Procs {
		if pr.Name == name {
			return pr.PID
		}
	}
	return 0
}
