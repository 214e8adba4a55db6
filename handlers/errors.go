package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handlerFunc is a handler of a signed-in user's request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, id vdi.Identity) error

// status maps an error code to its HTTP status.
func status(code vdi.Code) int {
	switch code {
	case vdi.ENotFound:
		return http.StatusNotFound
	case vdi.EConflict:
		return http.StatusConflict
	case vdi.EForbidden:
		return http.StatusForbidden
	case vdi.EInvalid:
		return http.StatusBadRequest
	case vdi.EUnavailable:
		return http.StatusServiceUnavailable
	case vdi.ETooLarge:
		return http.StatusRequestEntityTooLarge
	case vdi.EFull:
		return http.StatusInsufficientStorage
	case vdi.EUnauthorized:
		return http.StatusUnauthorized
	case vdi.EMisdirected:
		return http.StatusMisdirectedRequest
	case vdi.ETooMany:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// errorText returns what a user may read of err: its message and hint, or a
// generic text for internal errors, whose cause only goes to the log.
func (h *renderer) errorText(r *http.Request, err error) (code int, msg, hint string) {
	var le *limitError
	if errors.As(err, &le) {
		return http.StatusTooManyRequests, le.Msg, le.Hint
	}
	var e *vdi.Error
	if errors.As(err, &e) && e.Code != vdi.EInternal {
		code, msg, hint = status(e.Code), e.Msg, e.Hint
		if code >= 500 {
			h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		return code, msg, hint
	}
	h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	return http.StatusInternalServerError, "Internal error.", "Try again; if it persists, an admin can find the cause in the portal's log."
}

// limitError is a refusal for a limit (rate, console cap): 429 with
// Retry-After.
type limitError struct {
	After     time.Duration
	Msg, Hint string
}

func (e *limitError) Error() string { return e.Msg }

// setRetryAfter sets Retry-After for a limitError.
func setRetryAfter(w http.ResponseWriter, err error) {
	var le *limitError
	if errors.As(err, &le) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(le.After.Seconds())))))
	}
}

// api wraps an API handler: 401 without an identity, JSON errors.
func (h *guard) api(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.auth.Identify(r)
		if !ok {
			h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized, "Sign in at /signin, or reach the portal through your identity proxy.", "You are not signed in."))
			return
		}
		if err := h.serveLimited(w, r, id, fn); err != nil {
			h.writeAPIError(w, r, err)
		}
	}
}

// serveLimited runs fn for id within id's rate limit. An admin's request
// writes protected audit rows (vdi.Protect), and an admin's change is
// refused when the audit log could not keep its row.
func (h *guard) serveLimited(w http.ResponseWriter, r *http.Request, id vdi.Identity, fn handlerFunc) error {
	if err := h.limitUser(r, id); err != nil {
		return err
	}
	if id.Admin {
		if unsafeMethod(r.Method) && h.auditRoom != nil {
			if err := h.auditRoom(); err != nil {
				h.log.Warn("admin change refused: the audit log cannot keep it", "user", id.Login, "method", r.Method, "path", r.URL.Path)
				return err
			}
		}
		r = r.WithContext(vdi.Protect(r.Context()))
	}
	return fn(w, r, id)
}

// writeAPIError answers err in the API's error shape, with Retry-After
// for a limit.
func (h *renderer) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg, hint := h.errorText(r, err)
	setRetryAfter(w, err)
	writeJSON(w, code, api.Error{Msg: msg, Hint: hint})
}

// page wraps a page handler: sign-in redirect without an identity, an error
// page on failure.
func (h *guard) page(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.auth.Identify(r)
		if !ok {
			http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if err := h.serveLimited(w, r, id, fn); err != nil {
			if r.Pattern == claimFormPattern { // a rate limit: the page that says so may be reloaded
				http.Redirect(w, r, noticeURL(claimNotice(err), r.PathValue("ns"), r.PathValue("pool")), http.StatusSeeOther)
				return
			}
			h.writePageError(w, r, id, "", err)
		}
	}
}

// writePageError answers err with an error page titled title (by its
// status when empty), with Retry-After for a limit.
func (h *renderer) writePageError(w http.ResponseWriter, r *http.Request, id vdi.Identity, title string, err error) {
	code, msg, hint := h.errorText(r, err)
	setRetryAfter(w, err)
	if title == "" {
		title = titleFor(code)
	}
	h.render(w, r, code, views.Error(views.ErrorProps{Page: h.pageProps(title, id), Status: code, Msg: msg, Hint: hint}))
}

// writeJSON answers v as JSON, its length said (so that sendNow can send
// the whole answer before the handler returns).
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// sendNow sends what the handler wrote to the client at once: an answer
// whose length is said (writeJSON, an empty body) is then whole at the
// client while the handler goes on with what it need not wait for.
func sendNow(w http.ResponseWriter) {
	http.NewResponseController(w).Flush() // nothing to do when it cannot
}

// handleAPINotFound answers unknown /api/ routes in JSON.
func handleAPINotFound(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return vdi.Errorf(vdi.ENotFound, "See the HTTP API in the README.", "No API route %s %s.", r.Method, r.URL.Path)
}
