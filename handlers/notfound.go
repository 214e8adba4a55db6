package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleNotFound serves every route no other pattern matches: an HTML page
// with the header and a way home, for signed-in users and others alike
// (it names nothing of the portal's state).
func (h *fallback) handleNotFound(w http.ResponseWriter, r *http.Request) {
	id, _ := h.auth.Identify(r)
	h.render(w, r, http.StatusNotFound, views.Error(views.ErrorProps{
		Page:   h.pageProps(titleFor(http.StatusNotFound), id),
		Status: http.StatusNotFound,
		Msg:    "There is no page at " + r.URL.Path + ".",
		Hint:   "Check the address, or start again from your desktops.",
	}))
}

// handleFavicon serves GET /favicon.ico, which browsers ask for on every
// page whatever the page links: the portal's icon at its hashed URL.
func (h *fallback) handleFavicon(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, h.assets.URL("app/favicon.svg"), http.StatusMovedPermanently)
}

// titleFor is an error page's title in words a user reads (not
// "Conflict" or "Forbidden").
func titleFor(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "Check what was sent"
	case http.StatusUnauthorized:
		return "Sign in first"
	case http.StatusForbidden:
		return "Not allowed"
	case http.StatusNotFound:
		return "Page not found"
	case http.StatusConflict:
		return "Not possible right now"
	case http.StatusTooManyRequests:
		return "Too many requests"
	case http.StatusServiceUnavailable:
		return "Not available right now"
	}
	return "Something went wrong"
}
