package handlers

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// render writes a component with status code; a render failure is a 500.
func (h *renderer) render(w http.ResponseWriter, r *http.Request, code int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		h.log.Error("render", "path", r.URL.Path, "err", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (h *renderer) pageProps(title string, id vdi.Identity) views.Page {
	p := views.Page{Title: title, User: id, Asset: h.assets.URL, Modules: h.assets.Modules}
	if h.outage != nil {
		p.Outage = h.outage()
	}
	return p
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// securityHeaders sets the headers every response carries. The CSP lets
// IronRDP's wasm compile (wasm-unsafe-eval; never unsafe-eval) from its own
// file on the portal, and nothing inline run but styles, which the console
// clients set at run time.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; "+
		"img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}
