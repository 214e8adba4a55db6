package soak

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// recordingsFull fills the disk of the recordings (a 4 MiB tmpfs) from a
// recorded pool's terminal: the session ends saying why instead of going
// on unrecorded, a new recorded console is refused with what to do, and
// an unrecorded desktop's console (other, user:member) still answers.
func recordingsFull(r *report, p *portal, mountErr error, other string) {
	if mountErr != nil {
		r.add("fault", "recordings disk full: a small disk mounted", false, "tmpfs mounted", "%v", mountErr)
		return
	}
	ctx := context.Background()
	code, buf, _ := call(ctx, p.URL, "ops", "POST", "/api/vdi/pools", `{"name": "rec", "size": 1, "policy": {"record": true}}`)
	if code != http.StatusCreated {
		r.add("fault", "recordings disk full: recorded pool made", false, "201", "%d %.200s", code, buf)
		return
	}
	code, buf, _ = call(ctx, p.URL, "recuser", "POST", "/api/vdi/pools/local/rec/claim", "")
	d, _ := decode[desktop](buf)
	if code != 200 {
		r.add("fault", "recordings disk full: recorded desktop claimed", false, "200", "%d %.200s", code, buf)
		return
	}
	ws, err := dialTerminal(p.URL, "recuser", d.Name)
	if err != nil {
		r.add("fault", "recordings disk full: recorded console opened", false, "open", "%v", err)
		return
	}
	defer ws.Close()
	time.Sleep(300 * time.Millisecond)
	ws.WriteMessage(websocket.BinaryMessage, []byte("head -c 8000000 /dev/zero | tr '\\0' x; echo\n"))
	ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	var read int
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			ce, _ := err.(*websocket.CloseError)
			ok := ce != nil && (strings.Contains(ce.Text, "disk of the recordings is full") || strings.Contains(ce.Text, "space kept for its database"))
			r.add("fault", "recordings disk full: the recorded session ends, saying why", ok, "closed, \"disk ... full\"",
				"after %d KiB: %.160v", read>>10, err)
			break
		}
		read += len(msg)
	}
	ws2, res, err := websocketDial(p.URL, "recuser", "/ws/terminal/local/"+d.Name)
	if ws2 != nil {
		ws2.Close()
	}
	status := 0
	if res != nil {
		status = res.StatusCode
	}
	r.add("fault", "recordings disk full: a new recorded console is refused", err != nil && status == http.StatusServiceUnavailable,
		"503", "%d %v", status, err)
	user, member, _ := strings.Cut(other, ":")
	ows, err := dialTerminal(p.URL, user, member)
	if err == nil {
		time.Sleep(300 * time.Millisecond)
		err = echoOnce(ows, "unrecorded", 10*time.Second)
		ows.Close()
	}
	r.add("fault", "recordings disk full: unrecorded consoles still answer", err == nil, "terminal answers", "%s", errOr(err, "ok"))
	code, _, _ = call(ctx, p.URL, "", "GET", "/readyz", "")
	r.add("fault", "recordings disk full: portal ready", code == 200, "/readyz 200", "%d", code)
}
