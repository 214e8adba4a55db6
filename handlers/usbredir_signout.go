package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// usbSignOutPoll is how often an open USB stream looks for a sign-out of
// its user; the sign-out record is cached for about as long (auth).
const usbSignOutPoll = time.Second

// errUSBSignedOut ends a USB stream whose user signed out or had their
// sessions ended.
var errUSBSignedOut = errors.New("the user signed out, or an admin ended their sessions")

// usbSince returns the time a USB stream's authority dates from: when its
// token was minted, else now (a cookie or proxy identity checked just now).
func usbSince(r *http.Request) time.Time {
	if t, ok := r.Context().Value(usbSinceKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// endOnSignOut cancels a USB stream of login with errUSBSignedOut once
// login signs out or has their sessions ended after since, until ctx ends.
func (h *usbRoutes) endOnSignOut(ctx context.Context, cancel context.CancelCauseFunc, login string, since time.Time) {
	t := time.NewTicker(usbSignOutPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.auth.SignedOutSince(ctx, login, since) {
			h.log.Info("USB stream ended: its user signed out", "user", login)
			cancel(errUSBSignedOut)
			return
		}
	}
}
