package relay

import (
	"errors"
	"io"
	"sync"

	"github.com/gorilla/websocket"
)

// MaxText is the longest client text message Options.Text gets: a
// WebRTC offer is 2–6 KiB.
const MaxText = 32 << 10

// readText reads the text message r whole and gives it to text; one
// longer than MaxText is read to its end and dropped.
func readText(r io.Reader, text func([]byte)) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxText+1))
	if err != nil {
		return err
	}
	if len(b) > MaxText {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	text(b)
	return nil
}

// clientWriter writes to the client's websocket: the desktop's bytes and,
// in turn with them, Options.Text's replies.
type clientWriter struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (w *clientWriter) binary(p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ws.WriteMessage(websocket.BinaryMessage, p)
}

// errTextTooLong is text's error for a message longer than MaxText.
var errTextTooLong = errors.New("relay: a text message longer than MaxText")

func (w *clientWriter) text(p []byte) error {
	if len(p) > MaxText {
		return errTextTooLong
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ws.WriteMessage(websocket.TextMessage, p)
}
