package relay_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// wsServer serves one websocket that runs far, and returns its ws:// URL.
func wsServer(t *testing.T, far func(ws *websocket.Conn)) string {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		far(ws)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// TestWSConn checks the one websocket byte-stream adapter: binary messages
// in order as bytes, text messages skipped, a normal close as io.EOF, and a
// dropped connection as io.EOF only when asked for (KubeVirt's way).
func TestWSConn(t *testing.T) {
	tests := []struct {
		name    string
		opts    relay.WSConnOptions
		close   bool // a close frame, else the connection is dropped
		wantEOF bool
	}{
		{"CloseFrame", relay.WSConnOptions{}, true, true},
		{"DropIsError", relay.WSConnOptions{}, false, false},
		{"DropIsEOF", relay.WSConnOptions{DropIsEOF: true}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan []byte, 1)
			url := wsServer(t, func(ws *websocket.Conn) {
				ws.WriteMessage(websocket.BinaryMessage, []byte("ab"))
				ws.WriteMessage(websocket.TextMessage, []byte("not stream bytes"))
				ws.WriteMessage(websocket.BinaryMessage, []byte("cd"))
				typ, b, err := ws.ReadMessage()
				if err != nil || typ != websocket.BinaryMessage {
					got <- nil
				} else {
					got <- b
				}
				if tt.close {
					ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				}
				ws.NetConn().Close()
			})
			ws, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := relay.NewWSConn(ws, tt.opts)
			defer c.Close()
			if _, ok := any(c).(relay.Resizer); ok {
				t.Fatal("WSConn is a Resizer: resizes would reach a KubeVirt stream as text frames")
			}
			if _, err := c.Write([]byte("typed")); err != nil {
				t.Fatal(err)
			}
			if b := <-got; string(b) != "typed" {
				t.Errorf("far side read %q; want %q in one binary message", b, "typed")
			}
			var buf bytes.Buffer
			_, err = io.Copy(&buf, c) // io.Copy hides io.EOF: a nil error is the clean end
			if buf.String() != "abcd" {
				t.Errorf("read %q; want %q", buf.String(), "abcd")
			}
			if (err == nil) != tt.wantEOF {
				t.Errorf("end of stream: err = %v; want clean end %v", err, tt.wantEOF)
			}
		})
	}
}

// TestPeerConnResize checks that a peer link, unlike a bare WSConn, sends
// resizes on as a resize control message.
func TestPeerConnResize(t *testing.T) {
	got := make(chan string, 1)
	url := wsServer(t, func(ws *websocket.Conn) {
		typ, b, err := ws.ReadMessage()
		if err != nil || typ != websocket.TextMessage {
			got <- ""
			return
		}
		got <- string(b)
	})
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &relay.PeerConn{WSConn: relay.NewWSConn(ws, relay.WSConnOptions{})}
	defer c.Close()
	var _ net.Conn = c
	if err := c.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	want := string(relay.ResizeMessage(relay.Resize{Cols: 132, Rows: 43}))
	if g := <-got; g != want {
		t.Errorf("peer read %q; want %q", g, want)
	}
}

// TestWSConn_CloseWait checks that Close with CloseWait returns only
// once the far side has read its close, behind what was sent before
// (virt-handler lets a serial line go then), while a reader reads on,
// and that a far side that never reads holds Close no longer than
// CloseWait.
func TestWSConn_CloseWait(t *testing.T) {
	t.Run("Answered", func(t *testing.T) {
		release, sawClose := make(chan struct{}), make(chan bool, 1)
		url := wsServer(t, func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.BinaryMessage, []byte("output"))
			<-release // a guest that takes no input for a while
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					sawClose <- websocket.IsCloseError(err, websocket.CloseNormalClosure)
					ws.NetConn().Close()
					return
				}
			}
		})
		ws, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := relay.NewWSConn(ws, relay.WSConnOptions{DropIsEOF: true, CloseWait: time.Minute})
		if _, err := c.Write([]byte("typed ahead")); err != nil {
			t.Fatal(err)
		}
		read := make(chan struct{})
		go func() { // the stream's reader, as fanout's
			io.Copy(io.Discard, c)
			close(read)
		}()
		go func() {
			time.Sleep(200 * time.Millisecond)
			close(release)
		}()
		c.Close()
		select {
		case ok := <-sawClose:
			if !ok {
				t.Error("the far side read no normal close")
			}
		default:
			t.Error("Close returned before the far side read the close")
		}
		<-read
	})
	t.Run("Unanswered", func(t *testing.T) {
		never := make(chan struct{})
		url := wsServer(t, func(ws *websocket.Conn) { <-never })
		t.Cleanup(func() { close(never) })
		ws, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := relay.NewWSConn(ws, relay.WSConnOptions{CloseWait: 100 * time.Millisecond})
		c.Close() // returns: the test's own timeout would say it does not
	})
}
