package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// One-click connect: /connect answers the best console of a desktop and
// lists the others. Consoles are ranked by what their servers can do
// (vdi.Member.Ranked: a display, then the clipboard, then resizing), RDP
// before VNC between equals; an RDP server that does not answer an X.224
// probe is passed over. /connect answers from what the claim already knows:
// only the console it opens is probed on the way (and that probe started
// with the claim); the others are offered as they were last found, and the
// page asks again naming one (?protocol=) when the user picks it.

// handleDesktopConnect serves GET /api/vdi/desktops/{ns}/{member}/connect.
func (h *Handler) handleDesktopConnect(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, share, err := h.consoleDesktop(r.Context(), id, ref(r), vdi.ProtocolVNC)
	if err != nil {
		return err
	}
	if share != nil { // an invitation opens the screen, terminal and serial console, not RDP
		d.Protocols = slices.DeleteFunc(slices.Clone(d.Protocols), func(p vdi.Protocol) bool { return p == vdi.ProtocolRDP })
	}
	asked := vdi.Protocol(r.URL.Query().Get("protocol"))
	info, err := h.console.connectInfo(r.Context(), id, d, share, asked)
	if err != nil {
		return err
	}
	if id.Admin && r.URL.Query().Get("paths") == "1" {
		opts := append([]api.ConnectOption{info.ConnectOption}, info.Fallbacks...)
		h.console.dial.AnnotatePaths(r.Context(), d.Ref(), opts)
		info.ConnectOption, info.Fallbacks = opts[0], opts[1:]
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// connectInfo is /connect's answer for d: its consoles, the one the page
// opens first (asked, when d offers it), the pool's console policy.
func (c *consoleState) connectInfo(ctx context.Context, id vdi.Identity, d vdi.Desktop, share *vdi.Share, asked vdi.Protocol) (api.Connect, error) {
	if d.Power != vdi.PowerRunning || len(d.Protocols) == 0 {
		return api.Connect{}, notRunning(d)
	}
	opts := c.connectOptions(ctx, id, d, asked)
	if len(opts) == 0 {
		return api.Connect{}, vdi.Errorf(vdi.EUnavailable, "Stop and start the desktop, then connect again.", "No console of %s/%s answers.", d.Namespace, d.Name)
	}
	info := api.Connect{ConnectOption: opts[0], Fallbacks: append([]api.ConnectOption{}, opts[1:]...), Console: d.Console}
	if d.Recorded {
		info.Recorded, info.Notice = true, recordingNotice(d)
	}
	if share == nil && d.Holder != "" && d.Holder != id.Login && d.Console.Watch == vdi.WatchConsent {
		info.Asks = d.Holder
	}
	return info, nil
}

// connectOptions returns d's consoles, the one the request opens first:
// the ?protocol= it names when d offers it, else the most capable. The
// one it opens is probed (RDP's server must answer, a serial console's
// sign-in is read); the others are offered unless a probe found them
// dead, without the sign-in only a probe knows, so that /connect never
// waits on a console the page does not open.
func (c *consoleState) connectOptions(ctx context.Context, id vdi.Identity, d vdi.Desktop, asked vdi.Protocol) []api.ConnectOption {
	ranked := d.Ranked()
	if i := slices.Index(ranked, asked); i > 0 {
		ranked = append([]vdi.Protocol{asked}, slices.Delete(ranked, i, i+1)...)
	}
	var opts []api.ConnectOption
	for _, p := range ranked {
		caps := d.CapsOf(p)
		o := api.ConnectOption{Protocol: p, WebSocket: "/ws/" + string(p) + "/" + d.Namespace + "/" + d.Name, Caps: &caps}
		o.WebRTC = p == vdi.ProtocolVNC && c.cfg.RTC != nil
		opening := len(opts) == 0
		switch {
		case p == vdi.ProtocolRDP && opening:
			res := c.dial.Probe(ctx, d, p)
			if !res.OK {
				continue
			}
			o.Token = c.tokens.Mint(id.Login, d.Ref())
			o.Destination = rdpDestination(d.Ref())
			o.Credentials = holderSignIn(id, d, res)
		case p == vdi.ProtocolRDP:
			if res, known := c.dial.ProbeKnown(d, p); known && !res.OK {
				continue
			}
		case p == vdi.ProtocolSerial && opening:
			o.Credentials = holderSignIn(id, d, c.dial.Probe(ctx, d, p))
		}
		opts = append(opts, o)
	}
	return opts
}

// holderSignIn returns the sign-in a probe found, for the holder only.
func holderSignIn(id vdi.Identity, d vdi.Desktop, res console.ProbeResult) *api.Credentials {
	if d.Holder != id.Login || res.User == "" {
		return nil
	}
	return &api.Credentials{Username: res.User, Password: res.Password}
}

// notRunning is /connect's refusal for a desktop that is not running: what
// happened, and its way back (the console page's card offers the button).
func notRunning(d vdi.Desktop) error {
	hint := "Start it again, then connect."
	if d.Mode == vdi.ModeEphemeral {
		hint = "Get a fresh desktop in its place, then connect."
	}
	switch d.Power {
	case vdi.PowerStarting:
		hint = "Wait a moment: it is starting."
	case vdi.PowerStopping:
		hint = "Wait a moment for it to stop, then start it again."
	}
	msg := "Desktop " + d.Namespace + "/" + d.Name + " is " + string(d.Power) + "."
	if d.Reason != "" {
		msg += " " + d.Reason
	}
	return vdi.Errorf(vdi.EUnavailable, hint, "%s", msg)
}
