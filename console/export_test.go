package console

import "time"

// SetFollowWait sets how long an invitee's ended stream link looks for
// the holder's console again, for a test's life.
func SetFollowWait(d time.Duration) (restore func()) {
	old := followWait
	followWait = d
	return func() { followWait = old }
}
