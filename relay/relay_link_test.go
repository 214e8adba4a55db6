package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// TestPipe_LinkGone: a relay whose desktop side is a link to another
// portal tells its client which end went away. The far portal dropping
// the link without a close frame (killed) gives LinkGone's words; the far
// portal closing it because its desktop failed keeps "desktop connection
// failed", as does a relay without LinkGone. The far portal handing the
// console over (it drains: relay.HandedOver) is passed on as it came,
// 1012 with its reason, a clean end.
func TestPipe_LinkGone(t *testing.T) {
	const gone = "the portal server holding this desktop's screen went away"
	const moves = "the portal server holding this desktop's screen is shutting down; the screen moves to another one"
	closeWith := func(code int, reason string) func(ws *websocket.Conn) {
		return func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason))
			ws.ReadMessage() // its answer
			ws.Close()
		}
	}
	tests := []struct {
		name     string
		linkGone string
		far      func(ws *websocket.Conn) // how the far portal ends the link
		code     int
		want     string
	}{
		{"Dropped", gone, func(ws *websocket.Conn) { ws.NetConn().Close() }, websocket.CloseInternalServerErr, gone},
		{"DroppedWithoutOption", "", func(ws *websocket.Conn) { ws.NetConn().Close() }, websocket.CloseInternalServerErr, "desktop connection failed"},
		{"FarDesktopFailed", gone, closeWith(websocket.CloseInternalServerErr, "desktop connection failed"), websocket.CloseInternalServerErr, "desktop connection failed"},
		{"FarHandsOver", gone, closeWith(websocket.CloseServiceRestart, moves), websocket.CloseServiceRestart, moves},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end := make(chan struct{})
			far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := relay.Upgrader(nil).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				<-end
				tt.far(ws)
			}))
			defer far.Close()
			results := make(chan error, 1)
			near := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := relay.Upgrader(nil).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				link, _, err := websocket.DefaultDialer.Dial(wsURL(far.URL), nil)
				if err != nil {
					ws.Close()
					results <- err
					return
				}
				_, err = relay.Pipe(context.Background(), ws, relay.NewWSConn(link, relay.WSConnOptions{}), relay.Options{LinkGone: tt.linkGone})
				results <- err
			}))
			defer near.Close()

			ws, _, err := websocket.DefaultDialer.Dial(wsURL(near.URL), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			close(end)
			ce := readClose(t, ws)
			if ce.Code != tt.code || ce.Text != tt.want {
				t.Errorf("close = %d %q; want %d %q", ce.Code, ce.Text, tt.code, tt.want)
			}
			err = <-results
			if failed := tt.code != websocket.CloseServiceRestart; (err != nil) != failed {
				t.Errorf("Pipe error = %v; want one: %v (a hand-over is a clean end)", err, failed)
			}
		})
	}
}

// wsURL is the websocket URL of an httptest server's URL.
func wsURL(u string) string { return "ws" + strings.TrimPrefix(u, "http") }
