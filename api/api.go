// Package api holds what the portal and its clients agree on: the JSON of
// the /api/vdi routes that is not a domain type of vdi (request bodies,
// history rows, the connect answer, errors), and where a client on the
// portal's machine finds its admin socket. The handlers write these types
// and the admin CLI reads them, so neither restates the other.
package api

// Error is the body of every refusal of the API: what happened and what
// to do next.
type Error struct {
	// Status is the HTTP status the answer came with; it is not in the body.
	Status int    `json:"-"`
	Msg    string `json:"error"`
	Hint   string `json:"hint,omitempty"`
}

// Error returns the message with the hint on a line of its own.
func (e *Error) Error() string {
	if e.Hint == "" {
		return e.Msg
	}
	return e.Msg + "\n  " + e.Hint
}
