package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleConsolePage serves GET /desktops/{ns}/{member}: the console.
func (h *Handler) handleConsolePage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	asked := vdi.Protocol(r.URL.Query().Get("protocol"))
	likely := likelyConsole(d, asked)
	h.console.warmScreen(id, d, likely)
	h.render(w, r, http.StatusOK, views.Console(views.ConsoleProps{
		Page:       h.pageProps(d.Name, id),
		Desktop:    d,
		Size:       h.settings.sizeOf(r.Context(), id),
		Layout:     h.settings.layoutOf(r.Context(), id),
		ConnectURL: connectURL(d, r.URL.Query().Get("protocol")),
		DesktopURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name,
		USB:        h.usbHint(r, id, d),
		Files:      h.filesProps(r, id, d),
		ClipImages: h.clipImages.clipImagesProps(r, id, d),
		Audio:      h.audioProps(r, d),
		Share:      shareProps(id, d),
		Likely:     string(likely),
		Connect:    h.console.pageConnect(r.Context(), id, d, asked, likely),
	}))
	return nil
}

// pageConnect is /connect's answer for the console page to carry when the
// console it opens is VNC: known as the page goes out (nothing to probe)
// and holding no secret (an RDP token or a sign-in comes only with the
// console a /connect opens), it saves the page a request before its first
// pixels. Otherwise, or when d cannot be connected, the page asks.
func (c *consoleState) pageConnect(ctx context.Context, id vdi.Identity, d vdi.Desktop, asked, likely vdi.Protocol) *api.Connect {
	if likely != vdi.ProtocolVNC || d.Power != vdi.PowerRunning {
		return nil
	}
	info, err := c.connectInfo(ctx, id, d, nil, asked)
	if err != nil || info.Protocol != vdi.ProtocolVNC {
		return nil
	}
	return &info
}

// likelyConsole returns the console the page will most likely open for d:
// the one the page's ?protocol= asks for (a "Use VNC" link) when d offers
// it, else the most capable d offers (vdi.Member.Ranked). The page starts
// loading that console's client before /connect answers; it is a guess (an
// RDP server that does not answer the probe is passed over), never a
// promise.
func likelyConsole(d vdi.Desktop, asked vdi.Protocol) vdi.Protocol {
	if slices.Contains(d.Protocols, asked) {
		return asked
	}
	if r := d.Ranked(); len(r) > 0 {
		return r[0]
	}
	return ""
}

// connectURL is d's /connect, naming the console the page was asked for
// (a "Use RDP" link) so that /connect readies that one.
func connectURL(d vdi.Desktop, asked string) string {
	u := "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/connect"
	if slices.Contains(d.Protocols, vdi.Protocol(asked)) {
		u += "?protocol=" + asked
	}
	return u
}

// shareProps turns on the Share panel for d's holder, where the pool takes
// viewers.
func shareProps(id vdi.Identity, d vdi.Desktop) *views.ShareProps {
	if d.Holder != id.Login || d.Console.Watch == vdi.WatchOff {
		return nil
	}
	return &views.ShareProps{URL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/shares"}
}
