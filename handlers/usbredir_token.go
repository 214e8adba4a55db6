package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// usbTokenIssuer signs USB tokens with a key made at start-up.
var usbTokenIssuer = console.NewUSBTokens()

// usbSinceKey carries, on a request with a USB token, when it was minted.
type usbSinceKey struct{}

// usbAPI is api for /ws/usbredir: a request carrying "Authorization:
// Bearer <usb token>" is the token's user (never an admin), checked
// against the route's desktop; any other request is identified as usual.
func (h *usbRoutes) usbAPI(fn handlerFunc) http.HandlerFunc {
	plain := h.api(fn)
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			plain(w, r)
			return
		}
		login, issued, err := usbTokenIssuer.Login(strings.TrimSpace(tok), ref(r))
		if err != nil {
			h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized, "Copy a fresh command from the desktop's page and run it within "+console.USBTokenTTL.String()+".",
				"The USB token is not valid for this desktop, or has expired."))
			return
		}
		if h.auth.SignedOutSince(r.Context(), login, issued) {
			h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized, "Sign in again and copy a fresh command from the desktop's page.",
				"The USB token ended when you signed out, or when an admin ended your sessions."))
			return
		}
		id := vdi.Identity{Login: login, Name: login}
		r = r.WithContext(context.WithValue(r.Context(), usbSinceKey{}, issued))
		if err := h.serveLimited(w, r, id, fn); err != nil {
			h.writeAPIError(w, r, err)
		}
	}
}

// USBToken mints the token the console page's `usb redir` command carries
// for login on ref.
func USBToken(login string, ref vdi.Ref) string { return usbTokenIssuer.Mint(login, ref) }

// usbHint returns the console page's USB command for the holder of a VM
// on a portal that redirects USB, or nil.
func (h *usbRoutes) usbHint(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.USBHint {
	if d.Holder != id.Login || h.usbSupported(r.Context(), id, d) != nil || !h.isVM(r, id, d) {
		return nil
	}
	base := "http://" + r.Host
	if len(h.publicURLs) > 0 {
		base = strings.TrimSuffix(h.publicURLs[0], "/")
	}
	ref := d.Ref()
	return &views.USBHint{TokenTTL: fmt.Sprintf("%d minutes", int(console.USBTokenTTL.Minutes())), Command: "corral-vdi-portal usb redir --portal " + base + " " + ref.String() +
		" --device VID:PID --token " + usbTokenIssuer.Mint(id.Login, ref)}
}

// isVM reports whether d belongs to a vm pool that id can see.
func (h *usbRoutes) isVM(r *http.Request, id vdi.Identity, d vdi.Desktop) bool {
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return false
	}
	for _, p := range pools {
		if p.Namespace == d.Namespace && p.Name == d.Pool {
			return p.Kind == vdi.KindVM
		}
	}
	return false
}
