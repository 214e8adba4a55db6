package console

import (
	"net"
	"time"
)

// SetFollowWait sets how long an invitee's ended stream link looks for
// the holder's console again, for a test's life.
func SetFollowWait(d time.Duration) (restore func()) {
	old := followWait
	followWait = d
	return func() { followWait = old }
}

// SetHandOverWait sets how long the holder's new serial console waits for
// the older one to let go of the line, for a test's life.
func SetHandOverWait(d time.Duration) (restore func()) {
	old := handOverWait
	handOverWait = d
	return func() { handOverWait = old }
}

// LinkNonce returns the nonce of the screen link a client relayed to
// another replica's hub joined by (Screens.Join), or "".
func LinkNonce(c net.Conn) string {
	if l, ok := c.(*linkedScreen); ok {
		return l.Nonce
	}
	return ""
}
