package handlers

import "net/http"

// handleHealthz serves GET /healthz: the process is up.
func (h *Handler) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz: the portal can serve requests.
func (h *Handler) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := h.ready(r.Context()); err != nil {
		h.log.Warn("not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"Not ready.", "The portal's database or backend did not answer; see its log."})
		return
	}
	body := map[string]string{"status": "ready"}
	if n := h.notice(); n != "" {
		body["degraded"] = n
	}
	writeJSON(w, http.StatusOK, body)
}
