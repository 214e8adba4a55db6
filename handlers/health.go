package handlers

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// handleHealthz serves GET /healthz: the process is up.
func (h *probes) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz: the portal can serve requests. The
// reason it cannot is logged when it changes, not on every probe (a
// kubelet asks every few seconds).
func (h *probes) handleReadyz(w http.ResponseWriter, r *http.Request) {
	err := h.ready(r.Context())
	h.readyLog.note(h.log, err)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Msg: "Not ready.", Hint: "The portal's database or backend did not answer, or a setting is missing; see its log."})
		return
	}
	body := map[string]string{"status": "ready"}
	if n := h.notice(); n != "" {
		body["degraded"] = n
	}
	writeJSON(w, http.StatusOK, body)
}

// readyLog remembers the last readiness failure logged. The zero value is
// ready.
type readyLog struct {
	mu   sync.Mutex
	last string
}

// note logs err when its text differs from the last one logged, and that
// the portal is ready again when err is nil after a failure.
func (l *readyLog) note(log *slog.Logger, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	l.mu.Lock()
	changed := msg != l.last
	l.last = msg
	l.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		log.Warn("not ready", "err", err)
	default:
		log.Info("ready again")
	}
}
