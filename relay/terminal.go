package relay

import (
	"encoding/json"
)

// Terminal control messages.
//
// A serial console or terminal websocket carries keystrokes from the client
// as text or binary frames; both are bytes for the desktop. One kind of
// frame is not: a text frame whose whole content is a JSON object with
// "type":"resize" is a resize of the client's terminal,
//
//	{"type":"resize","cols":120,"rows":40}
//
// and never reaches the desktop, even when its size is not one to take
// (zero, negative, above 1000: dropped). A terminal (a pty) takes the new size; a
// serial console cannot carry it, so there it is dropped. Keystrokes come as
// short frames of typed text, so a typed frame is never such an object; only
// a paste of exactly that text would be taken for a resize.

// maxControl is the longest text frame looked at as a control message.
const maxControl = 256

// Resize is a terminal resize request from the client.
type Resize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ParseResize reports whether the client message p is a resize control
// message, and returns it. Sizes of zero or above 1000 are not resizes.
func ParseResize(p []byte) (Resize, bool) {
	if len(p) < 2 || len(p) > maxControl || p[0] != '{' {
		return Resize{}, false
	}
	var m struct {
		Type string `json:"type"`
		Resize
	}
	if err := json.Unmarshal(p, &m); err != nil || m.Type != "resize" {
		return Resize{}, false
	}
	if m.Cols == 0 || m.Rows == 0 || m.Cols > 1000 || m.Rows > 1000 {
		return Resize{}, false
	}
	return m.Resize, true
}

// isResize reports whether the client message p is a resize control
// message, whether or not its size is one to take (ParseResize): one with
// a size of zero, negative or too large is dropped, never typed.
func isResize(p []byte) bool {
	if len(p) < 2 || len(p) > maxControl || p[0] != '{' {
		return false
	}
	var m struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(p, &m) == nil && m.Type == "resize"
}

// ResizeMessage returns the control message for r, as the browser sends it.
func ResizeMessage(r Resize) []byte {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Resize
	}{"resize", r})
	return b
}

// A Resizer is a desktop stream that can take a new terminal size, in
// character cells: a pty, an exec session, or a peer portal's stream that
// carries the request on. Its method takes plain numbers, so backends
// implement it without importing the relay.
type Resizer interface {
	Resize(cols, rows uint16) error
}

// TerminalControl returns an Options.Control for a serial console or
// terminal on conn: resize messages go to conn when it is a Resizer and are
// dropped otherwise, so they never reach a serial line as bytes; one whose
// size cannot be taken (cols 0) is dropped too.
func TerminalControl(conn any) func(p []byte) bool {
	rz, _ := conn.(Resizer)
	return func(p []byte) bool {
		r, ok := ParseResize(p)
		if ok && rz != nil {
			rz.Resize(r.Cols, r.Rows)
		}
		return ok || isResize(p)
	}
}
