package relay_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// TestPipe_Text: with Options.Text, the client's text messages go to it
// and never to the desktop (a VNC console's WebRTC signalling), binary
// messages still do, a reply reaches the client as text among the
// desktop's binary messages, and a text message over MaxText is dropped.
func TestPipe_Text(t *testing.T) {
	got := make(chan string, 4)
	h := MustHarness(t, "tcp", relay.Options{Text: func(msg []byte, send func([]byte) error) {
		got <- string(msg)
		send([]byte("re: " + string(msg)))
	}})
	ws, desk := h.MustConnect(t)
	defer ws.Close()
	defer desk.Close()

	ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2})
	ws.WriteMessage(websocket.TextMessage, []byte(`{"rtc":"offer"}`))
	ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", relay.MaxText+1)))
	ws.WriteMessage(websocket.BinaryMessage, []byte{3})
	b := make([]byte, 3)
	desk.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(desk, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("desktop got %v; want [1 2 3]: text messages are not the desktop's", b)
	}
	if m := <-got; m != `{"rtc":"offer"}` {
		t.Errorf("Text got %q", m)
	}
	desk.Write([]byte{9, 9})
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var text, binary int
	for text == 0 || binary == 0 {
		mt, p, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		switch mt {
		case websocket.TextMessage:
			text++
			if string(p) != `re: {"rtc":"offer"}` {
				t.Errorf("client got the text %q", p)
			}
		case websocket.BinaryMessage:
			binary++
		}
	}
	select {
	case m := <-got:
		t.Errorf("Text got a message of %d bytes; want it dropped (over MaxText)", len(m))
	default:
	}
}
