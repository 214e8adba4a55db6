package vdi

import (
	"context"
	"errors"
	"net"
	"strconv"
)

// HeadDialer is a Backend whose virtual machines' displays may have
// several heads, each served by a VNC server of its own (Caps.Heads):
// the local backend's QEMU guests.
type HeadDialer interface {
	// DialHead opens a byte stream to the VNC server of head n (from 1)
	// of a running member's display.
	DialHead(ctx context.Context, ref Ref, n int) (net.Conn, error)
}

// DialHead opens the VNC stream of head n of a running member's display,
// for a console's screen window. Callers authorize first.
func (s *Service) DialHead(ctx context.Context, ref Ref, n int) (net.Conn, error) {
	hd, ok := s.backend.(HeadDialer)
	if !ok {
		return nil, Errorf(EInvalid, "Make the console's window larger, or use Full screen.", "The display of %s has one head, so it shows on one screen.", ref)
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return nil, err
	}
	if m.Power != PowerRunning {
		return nil, Errorf(EUnavailable, "Start it from the desktop page, then connect again.", "Desktop %s is %s.", ref, m.Power)
	}
	conn, err := hd.DialHead(ctx, ref, n)
	if e := (*Error)(nil); errors.As(err, &e) {
		return nil, err // the backend's own words: no such head
	} else if err != nil {
		return nil, &Error{Code: EUnavailable, Err: err, Msg: "Screen " + strconv.Itoa(n) + " of " + ref.String() + " did not answer.",
			Hint: "Close its window and add the screen again; if it keeps failing, stop and start the desktop."}
	}
	return conn, nil
}
