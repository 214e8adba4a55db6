package vdi

import (
	"context"
	"errors"
)

// ErrNoScreenshot is what a Screenshotter returns (wrapped) when a member
// has no screenshot of its own, e.g. on a KubeVirt older than 1.7: the
// caller takes its picture over VNC instead.
var ErrNoScreenshot = errors.New("vdi: no screenshot without the console")

// Screenshotter is implemented by backends that can take a picture of a
// running member's screen without opening its console: KubeVirt 1.7's
// vnc/screenshot reads the display, where a VNC client through virt-api
// would kick the holder's console.
type Screenshotter interface {
	// Screenshot returns a PNG of the member's screen. Its size comes
	// from the guest: decode it with bounds (snapshot.FromPNG).
	Screenshot(ctx context.Context, ref Ref) ([]byte, error)
}

// Screenshot returns a PNG of a running member's screen from its
// platform, or an error wrapping ErrNoScreenshot when the backend has no
// such way and the caller should Dial its VNC console. Callers authorize
// first.
func (s *Service) Screenshot(ctx context.Context, ref Ref) ([]byte, error) {
	sc, ok := s.backend.(Screenshotter)
	if !ok {
		return nil, ErrNoScreenshot
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return nil, err
	}
	if m.Power != PowerRunning {
		return nil, Errorf(EUnavailable, "Start it from the desktop page, then look again.", "Desktop %s is %s.", ref, m.Power)
	}
	return sc.Screenshot(ctx, ref)
}
