package handlers

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// maxScreens is how many browser windows one VNC console may show a
// desktop in: the console's own window and two more (static/app/vnc-screens.js).
const maxScreens = 3

// consoleScreen reads the ?screen= of a console websocket: 0 for the
// console's own window, 2 or 3 for a screen window the holder's console
// opened. On a desktop whose server gives each window a screen (Xvnc, one
// RandR output each) or one display as wide as the windows together
// (caps.Split: a KubeVirt VM) it shows another part of the same desktop
// and joins the desktop's screen beside the console's own connection
// instead of taking it over; on a VM whose display has heads (caps.Heads)
// it shows head n, a VNC server of its own (joinHead). Only the holder's
// VNC console of such a desktop has screens; anything else is refused
// with what to do instead.
func consoleScreen(r *http.Request, p vdi.Protocol, caps vdi.Caps, holder bool) (int, error) {
	v := r.URL.Query().Get("screen")
	if v == "" {
		return 0, nil
	}
	if p != vdi.ProtocolVNC {
		return 0, vdi.Errorf(vdi.EInvalid, "Open the screen from a VNC console's Size list.", "Only VNC consoles show a desktop on more than one screen, not %s.", p)
	}
	split := caps.Screens || caps.Split // screen windows split one desktop
	if !split && caps.Heads < 2 {
		return 0, vdi.Errorf(vdi.EInvalid, "Make the console's window larger, or use Full screen.",
			"This desktop's display has one head (a virtual machine's), so it shows on one screen, not in a screen window.")
	}
	if n, err := strconv.Atoi(v); err == nil && n > maxScreens {
		return 0, vdi.Errorf(vdi.EInvalid, "Close one of the desktop's screen windows first.",
			"A desktop's console shows it on at most %d screens: its own window and screens 2 and 3, not screen %q.", maxScreens, v)
	}
	if v != "2" && v != "3" {
		return 0, vdi.Errorf(vdi.EInvalid, "Open another screen with Add a screen in the console's Size list.",
			"Screen windows are screens 2 and 3 (the console's own window, with no ?screen=, is screen 1), not screen %q.", v)
	}
	if n := int(v[0] - '0'); !split && n > caps.Heads {
		return 0, vdi.Errorf(vdi.EInvalid, "Close screen 3's window; the VM's screens are its console's window and screen 2.",
			"This virtual machine's display has %d heads, so it shows on %d screens, not on a screen %d.", caps.Heads, caps.Heads, n)
	}
	if !holder {
		return 0, vdi.Errorf(vdi.EForbidden, "Watch the holder's screen in one window.", "Only the desktop's holder adds screens to it.")
	}
	return int(v[0] - '0'), nil
}

// headKey names the screen hub of head n of a VM's display: the first
// head's hub is the desktop's own (console.Screens); each further head's
// is this replica's, since the heads' VNC servers are the local backend's
// sockets on this host.
func headKey(ref vdi.Ref, n int) string { return ref.String() + "/head" + strconv.Itoa(n) }

// headDialer is the claim service where a VM's display may have heads
// (vdi.Service.DialHead).
type headDialer interface {
	DialHead(ctx context.Context, ref vdi.Ref, n int) (net.Conn, error)
}

// joinHead joins the screen hub of head n of ref's display, which holder,
// invitees and admins share as they share the first head's; control says
// whether the client's input reaches it.
func (h *Handler) joinHead(ctx context.Context, ref vdi.Ref, n int, control bool) (net.Conn, string, error) {
	hd, ok := h.desktops.(headDialer)
	if !ok {
		return nil, "", oneHead(ref)
	}
	return h.console.hubs.Join(ctx, headKey(ref, n), control, func(ctx context.Context) (net.Conn, string, error) {
		c, err := hd.DialHead(context.WithoutCancel(ctx), ref, n)
		return c, console.PathDirect, err
	})
}

// oneHead is the refusal of a screen window of a display with one head.
func oneHead(ref vdi.Ref) error {
	return vdi.Errorf(vdi.EInvalid, "Make the console's window larger, or use Full screen.", "The display of %s has one head, so it shows on one screen.", ref)
}
