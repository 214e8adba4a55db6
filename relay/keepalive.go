package relay

import (
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// keepalive pings a client and moves its read deadline forward whenever the
// client shows a sign of life. A nil *keepalive does nothing.
type keepalive struct {
	ws    *websocket.Conn
	every time.Duration

	mu      sync.Mutex
	stopped bool // Pipe owns the read deadline from now on
}

// newKeepalive returns a keepalive for ws, or nil when every is not positive.
func newKeepalive(ws *websocket.Conn, every time.Duration) *keepalive {
	if every <= 0 {
		return nil
	}
	k := &keepalive{ws: ws, every: every}
	k.extend()
	ws.SetPongHandler(func(string) error { k.extend(); return nil })
	return k
}

// extend gives the client another two ping intervals to show life.
func (k *keepalive) extend() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		k.ws.SetReadDeadline(time.Now().Add(2 * k.every))
	}
}

// stop ends deadline updates, so that the closing handshake's own deadline
// is not moved by a late pong.
func (k *keepalive) stop() {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
}

// ping sends a ping every interval until done is closed or a ping fails.
func (k *keepalive) ping(done <-chan struct{}) {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if err := k.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(k.every)); err != nil {
				return
			}
		}
	}
}
