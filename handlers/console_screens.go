package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// maxScreens is how many browser windows one VNC console may show a
// desktop in: the console's own window and two more (static/app/vnc-screens.js).
const maxScreens = 3

// consoleScreen reads the ?screen= of a console websocket: 0 for the
// console's own window, 2 or 3 for a screen window the holder's console
// opened, which shows another part of the same desktop (one RandR output
// of Xvnc each) and joins the desktop's screen beside the console's own
// connection instead of taking it over. Only the holder's VNC console of
// a desktop whose server gives each window a screen (caps) has screens;
// anything else is refused with what to do instead.
func consoleScreen(r *http.Request, p vdi.Protocol, caps vdi.Caps, holder bool) (int, error) {
	v := r.URL.Query().Get("screen")
	if v == "" {
		return 0, nil
	}
	if p != vdi.ProtocolVNC {
		return 0, vdi.Errorf(vdi.EInvalid, "Open the screen from a VNC console's Size list.", "Only VNC consoles show a desktop on more than one screen, not %s.", p)
	}
	if !caps.Screens {
		return 0, vdi.Errorf(vdi.EInvalid, "Make the console's window larger, or use Full screen.",
			"This desktop's display has one head (a virtual machine's), so it shows on one screen, not in a screen window.")
	}
	if v != "2" && v != "3" {
		return 0, vdi.Errorf(vdi.EInvalid, "Close one of the desktop's screen windows first.",
			"A desktop's console shows it on at most %d screens: its own window and screens 2 and 3, not screen %q.", maxScreens, v)
	}
	if !holder {
		return 0, vdi.Errorf(vdi.EForbidden, "Watch the holder's screen in one window.", "Only the desktop's holder adds screens to it.")
	}
	return int(v[0] - '0'), nil
}
