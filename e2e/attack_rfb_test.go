package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// What the attack rows send a desktop's VNC console, and the check that
// none of it reached the desktop.

// rfbClient does an RFB 3.8 handshake (security None, shared) over ws and
// sends msgs, each as one binary message.
func rfbClient(t *testing.T, ws *websocket.Conn, msgs [][]byte) {
	t.Helper()
	send := rfbHandshake(t, ws)
	for _, m := range msgs {
		send(m)
	}
	time.Sleep(200 * time.Millisecond) // let the relay pass them on (or not)
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}

// rfbHandshake does rfbClient's handshake and returns how to send more.
func rfbHandshake(t *testing.T, ws *websocket.Conn) (send func([]byte)) {
	t.Helper()
	read := rfbReader(t, ws, "RFB handshake")
	send = func(b []byte) {
		if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
			t.Fatalf("RFB send: %v", err)
		}
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	read(12)
	send([]byte("RFB 003.008\n"))
	n := int(read(1)[0])
	if !slices.Contains(read(n), 1) {
		t.Fatal("the desktop offers no security type None")
	}
	send([]byte{1})
	read(4)         // SecurityResult
	send([]byte{1}) // ClientInit: shared
	init := read(24)
	read(int(init[20])<<24 | int(init[21])<<16 | int(init[22])<<8 | int(init[23])) // the desktop's name
	return send
}

// rfbReader returns a reader of ws's stream n bytes at a time, whatever
// its framing in messages; an error ends the test, said as what.
func rfbReader(t *testing.T, ws *websocket.Conn, what string) (read func(n int) []byte) {
	var got []byte
	return func(n int) []byte {
		for len(got) < n {
			_, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got = append(got, b...)
		}
		out := got[:n]
		got = got[n:]
		return out
	}
}

// rfbInputs are what a viewer sends to change a desktop: a key, a click,
// the clipboard, a resize and an xvp reboot.
func rfbInputs() [][]byte {
	return [][]byte{
		{4, 1, 0, 0, 0, 0, 0, 0x61},                        // KeyEvent 'a' down
		{5, 1, 0, 10, 0, 10},                               // PointerEvent, button 1
		append([]byte{6, 0, 0, 0, 0, 0, 0, 5}, "rm -r"...), // ClientCutText
		{251, 0, 1, 0, 0, 200, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 200, 0, 0, 0, 0}, // SetDesktopSize 256x200
		{250, 0, 1, 3}, // xvp reboot
	}
}

// noInputReached waits for user's last console session to close and
// checks that only 14 bytes of handshake and the portal's 12-byte
// SetEncodings (relay.RFBViewOnly) reached the desktop: nothing user sent
// after it, and no input.
func noInputReached(t *testing.T, a *arena, user string) {
	t.Helper()
	var s struct {
		BytesIn   int64     `json:"bytesIn"`
		LastInput time.Time `json:"lastInput"`
		Closed    time.Time `json:"closed"`
	}
	waitFor(t, 10*time.Second, user+"'s session closed", func() bool {
		var ss []json.RawMessage
		a.p.API(t, admin, "GET", "/api/vdi/history/sessions?user="+user+"&limit=1", &ss)
		return len(ss) == 1 && json.Unmarshal(ss[0], &s) == nil && !s.Closed.IsZero()
	})
	if s.BytesIn != 14+12 || !s.LastInput.IsZero() {
		t.Errorf("%s's session: %d bytes reached the desktop, last input %v; want only the 14-byte handshake and the portal's 12, no input", user, s.BytesIn, s.LastInput)
	}
}
