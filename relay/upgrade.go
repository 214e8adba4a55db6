package relay

import (
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
)

// writeBufferPool lends write buffers to peer websockets only while a
// message is being written, so idle ones hold none. It is for connections
// whose write buffer is peerBufferSize (gorilla does not check the size of
// what a pool returns).
var writeBufferPool = new(sync.Pool)

// peerBufferSize is the read and write buffer size of a websocket to a
// peer portal.
const peerBufferSize = 32 << 10

// consoleWriteBufferPool is writeBufferPool for console connections,
// whose write buffers are consoleWriteBuffer bytes.
var consoleWriteBufferPool = new(sync.Pool)

// consoleWriteBuffer is the write buffer of a console connection. It is
// small on purpose: gorilla copies a message into it up to its size and
// sends the rest from the caller's slice in the same vectored write, so a
// large desktop update goes out as frame header + payload without a copy.
const consoleWriteBuffer = 512

// A terminal or serial console page offers two subprotocols so that the
// portal can tell it, in the handshake, how its console opened: as the
// page asked (SubprotocolConsole), or view only where the page asked for
// one of its own (SubprotocolViewOnly: an admin's serial console that
// joined another admin's, a line taking one client). The page's keys
// never reach the desktop view only, whatever it does with them.
// A page that also offers SubprotocolRefused is told a refusal in band:
// the handshake chooses it, one text message says why, and the console
// closes (a browser cannot read a refused handshake's answer).
const (
	SubprotocolConsole  = "corral-vdi.console"
	SubprotocolViewOnly = "corral-vdi.view-only"
	SubprotocolRefused  = "corral-vdi.refused"
)

// Upgrader returns a websocket upgrader for console connections. It offers
// the "binary" subprotocol that noVNC asks for and SubprotocolConsole, and
// also accepts clients that ask for none (IronRDP). Compression is off: desktop streams are
// already compressed or latency-bound, and compression costs memory per
// connection.
//
// checkOrigin reports whether a request's Origin is allowed; if it is nil,
// the Origin host must equal the request's Host.
func Upgrader(checkOrigin func(*http.Request) bool) *websocket.Upgrader {
	return &websocket.Upgrader{
		// Zero: read through the 4 KiB buffer net/http already has for the
		// connection. A message's payload larger than that bypasses it and
		// lands straight in Pipe's buffer, so this costs no reads.
		ReadBufferSize:    0,
		WriteBufferSize:   consoleWriteBuffer,
		WriteBufferPool:   consoleWriteBufferPool,
		Subprotocols:      []string{"binary", SubprotocolConsole},
		EnableCompression: false,
		CheckOrigin:       checkOrigin,
	}
}
