package relay

import (
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
)

// writeBufferPool lends write buffers to all relay websockets only while a
// message is being written, so idle consoles hold none.
var writeBufferPool = new(sync.Pool)

// Upgrader returns a websocket upgrader for console connections. It offers
// the "binary" subprotocol that noVNC asks for and also accepts clients that
// ask for none (IronRDP, xterm.js). Compression is off: desktop streams are
// already compressed or latency-bound, and compression costs memory per
// connection.
//
// checkOrigin reports whether a request's Origin is allowed; if it is nil,
// the Origin host must equal the request's Host.
func Upgrader(checkOrigin func(*http.Request) bool) *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:    DefaultBufferSize,
		WriteBufferSize:   DefaultBufferSize,
		WriteBufferPool:   writeBufferPool,
		Subprotocols:      []string{"binary"},
		EnableCompression: false,
		CheckOrigin:       checkOrigin,
	}
}
