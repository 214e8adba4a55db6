package handlers

import (
	"context"
	"errors"
	"image"
	"net"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// takeThumb takes a picture of ref's screen for the dashboard: from its
// platform where it has one (KubeVirt 1.7's vnc/screenshot, which leaves
// the holder's console connected), else from the desktop's shared VNC
// connection, as for local desktops and older KubeVirt. A failed
// screenshot falls back to VNC too (e.g. a VMI without a display whose
// guest runs its own server).
func (h *adminPages) takeThumb(ctx context.Context, ref vdi.Ref) (*image.RGBA, error) {
	b, err := h.desktops.Screenshot(ctx, ref)
	if err == nil {
		var img *image.RGBA
		if img, err = snapshot.FromPNG(b, thumbWidth); err == nil {
			return img, nil
		}
	}
	if ve := (*vdi.Error)(nil); errors.As(err, &ve) { // gone or stopped: VNC cannot mend it
		return nil, err
	}
	if !errors.Is(err, vdi.ErrNoScreenshot) {
		h.log.Debug("thumbnail: no screenshot, trying VNC", "desktop", ref.String(), "err", err)
	}
	// From the desktop's shared VNC connection (rfb.Hub) when its
	// consoles are open, so that a thumbnail is never a second viewer.
	conn, _, err := h.console.screens.Join(ctx, ref, false, func(ctx context.Context) (net.Conn, string, error) {
		c, err := h.desktops.Dial(ctx, ref, vdi.ProtocolVNC)
		return c, console.PathDirect, err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	img, err := snapshot.Take(conn, thumbWidth, time.Now().Add(5*time.Second))
	if err != nil {
		return nil, &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "No picture of " + ref.String() + ".", Hint: "The desktop may be starting; the dashboard tries again."}
	}
	return img, nil
}
