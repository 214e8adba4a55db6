package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestDrain is the Deployment's preStop drain on the real binary: after
// SIGTERM the portal fails /readyz, refuses a new console with 503 (the
// page reconnects through the Service to another replica), keeps the open
// console working, and exits as soon as that console closes, well before
// CORRAL_VDI_DRAIN_TIMEOUT.
func TestDrain(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS="+admin, "CORRAL_VDI_DRAIN_TIMEOUT=2m")
	if code := p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name": "drain", "size": 1}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	var d desktop
	if code := p.API(t, admin, "POST", "/api/vdi/pools/local/drain/claim", &d); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	path := "/ws/terminal/local/" + d.Name
	ws, _, err := dialWS(p, admin, path, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteMessage(websocket.TextMessage, []byte("echo before-$((1+1))\r"))
	readUntilWS(t, ws, "before-2", 10*time.Second)

	must(t, p.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	waitFor(t, 10*time.Second, "/readyz fails while draining", func() bool { return get(t, p.URL+"/readyz", nil) == 503 })
	if code := get(t, p.URL+"/healthz", nil); code != 200 {
		t.Errorf("/healthz while draining: %d; want 200 (alive: no restart)", code)
	}
	if _, res, err := dialWS(p, admin, path, p.URL); err == nil || res == nil || res.StatusCode != 503 {
		t.Fatalf("a new console while draining: %v %v; want refused with 503", err, status(res))
	}
	ws.WriteMessage(websocket.TextMessage, []byte("echo during-$((2+3))\r"))
	readUntilWS(t, ws, "during-5", 10*time.Second)
	select {
	case err := <-exited:
		t.Fatalf("the portal exited with a console open: %v", err)
	case <-time.After(time.Second):
	}

	closed := time.Now()
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	ws.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the portal's exit after the drain: %v\n%s", err, p.Log())
		}
		t.Logf("exited %v after the last console closed (drain timeout 2m)", time.Since(closed).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatalf("the portal still runs 30s after its last console closed:\n%s", p.Log())
	}
}
