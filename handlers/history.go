package handlers

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// formTime is how a datetime-local input sends a time (the portal's zone).
const formTime = "2006-01-02T15:04"

// historyQuery is a parsed history filter with the form's raw values.
type historyQuery struct {
	filter                   vdi.HistoryFilter
	user, pool, since, until string
	pools                    []string
}

// parseHistory reads ?user=&pool=ns/name&since=&until= and resolves the
// pool to its member names.
func (h *historyPages) parseHistory(r *http.Request, id vdi.Identity) (historyQuery, error) {
	q := r.URL.Query()
	hq := historyQuery{user: strings.TrimSpace(q.Get("user")), pool: q.Get("pool"), since: q.Get("since"), until: q.Get("until")}
	hq.filter.User = hq.user
	for _, b := range []struct {
		name, in string
		out      *time.Time
	}{{"since", hq.since, &hq.filter.Since}, {"until", hq.until, &hq.filter.Until}} {
		if b.in == "" {
			continue
		}
		t, err := time.ParseInLocation(formTime, b.in, time.Local)
		if err != nil { // API clients (the admin CLI) send RFC 3339
			t, err = time.Parse(time.RFC3339, b.in)
		}
		if err != nil {
			return hq, vdi.Errorf(vdi.EInvalid, "Write times as 2006-01-02T15:04 (the portal's zone) or RFC 3339.", "%q is not a time for %s.", b.in, b.name)
		}
		*b.out = t
	}
	pools, err := h.admin.Dashboard(r.Context(), id)
	if err != nil {
		return hq, err
	}
	for _, p := range pools {
		key := p.Namespace + "/" + p.Name
		hq.pools = append(hq.pools, key)
		if key == hq.pool {
			hq.filter.Targets = []string{p.Name}
			for _, m := range p.Members {
				hq.filter.Targets = append(hq.filter.Targets, m.Name)
			}
		}
	}
	if hq.pool != "" && hq.filter.Targets == nil {
		hq.filter.Targets = []string{} // a pool that is gone: its members are unknown
	}
	return hq, nil
}

// handleHistoryPage serves GET /admin/history: sessions and audit log.
func (h *historyPages) handleHistoryPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	hq, err := h.parseHistory(r, id)
	if err != nil {
		return err
	}
	hq.filter.Limit = 200
	sessions, err := h.history.SessionHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	audit, err := h.history.AuditHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	var recorded map[string]bool
	if h.recordings != nil {
		ids := make([]string, len(sessions))
		for i, s := range sessions {
			ids[i] = s.ID
		}
		if recorded, err = h.recordings.Recorded(r.Context(), ids); err != nil {
			return err
		}
	}
	var pruned *views.PruneNote
	if p, ok, err := h.history.LastPrune(r.Context()); err != nil {
		return err
	} else if ok {
		pruned = &views.PruneNote{At: p.At, Audit: p.Audit, Session: p.Session}
	}
	query := url.Values{}
	for k, v := range map[string]string{"user": hq.user, "pool": hq.pool, "since": hq.since, "until": hq.until} {
		if v != "" {
			query.Set(k, v)
		}
	}
	h.render(w, r, http.StatusOK, views.History(views.HistoryProps{
		Page: h.pageProps("History", id), User: hq.user, Pool: hq.pool, Since: hq.since, Until: hq.until,
		Pools: hq.pools, Sessions: sessionRows(sessions), Recorded: recorded, Audit: auditRows(audit), Query: query.Encode(), Pruned: pruned, Replica: h.replica,
	}))
	return nil
}

// handleSessionsCSV serves GET /admin/history/sessions.csv.
func (h *historyPages) handleSessionsCSV(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	hq, err := h.parseHistory(r, id)
	if err != nil {
		return err
	}
	hq.filter.Limit = 100_000
	sessions, err := h.history.SessionHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	cw := csvResponse(w, "sessions.csv")
	cw.Write([]string{"id", "user", "namespace", "desktop", "protocol", "path", "opened", "closed", "bytes_in", "bytes_out", "last_input", "close_reason"})
	for _, s := range sessions {
		cw.Write(csvRow(s.ID, s.Login, s.Namespace, s.Member, s.Protocol, s.Path, csvTime(s.OpenedAt), csvTime(s.ClosedAt),
			strconv.FormatInt(s.BytesIn, 10), strconv.FormatInt(s.BytesOut, 10), csvTime(s.LastInput), s.CloseReason))
	}
	cw.Flush()
	return nil
}

// handleAuditCSV serves GET /admin/history/audit.csv.
func (h *historyPages) handleAuditCSV(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	hq, err := h.parseHistory(r, id)
	if err != nil {
		return err
	}
	hq.filter.Limit = 100_000
	entries, err := h.history.AuditHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	cw := csvResponse(w, "audit.csv")
	cw.Write([]string{"id", "at", "actor", "action", "namespace", "target", "detail"})
	for _, e := range entries {
		cw.Write(csvRow(strconv.FormatInt(e.ID, 10), csvTime(e.At), e.Actor, e.Action, e.Namespace, e.Target, e.Detail))
	}
	cw.Flush()
	return nil
}

// historyLimit reads ?limit= of the JSON history routes: 1000 by default.
func historyLimit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 100_000 {
		return 0, vdi.Errorf(vdi.EInvalid, "Give a limit from 1 to 100000.", "%q is not a row limit.", s)
	}
	return n, nil
}

// handleSessionsJSON serves GET /api/vdi/history/sessions (admins): the
// filters of /admin/history, newest first, up to ?limit=.
func (h *historyPages) handleSessionsJSON(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	hq, err := h.parseHistory(r, id)
	if err != nil {
		return err
	}
	if hq.filter.Limit, err = historyLimit(r); err != nil {
		return err
	}
	sessions, err := h.history.SessionHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	out := make([]api.Session, 0, len(sessions))
	for _, s := range sessions {
		out = append(out, api.Session{ID: s.ID, User: s.Login, Namespace: s.Namespace, Desktop: s.Member, Protocol: s.Protocol,
			Path: s.Path, Opened: s.OpenedAt, Closed: s.ClosedAt, BytesIn: s.BytesIn, BytesOut: s.BytesOut,
			LastInput: s.LastInput, CloseReason: s.CloseReason})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleAuditJSON serves GET /api/vdi/history/audit (admins): the filters
// of /admin/history, newest first, up to ?limit=.
func (h *historyPages) handleAuditJSON(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	hq, err := h.parseHistory(r, id)
	if err != nil {
		return err
	}
	if hq.filter.Limit, err = historyLimit(r); err != nil {
		return err
	}
	entries, err := h.history.AuditHistory(r.Context(), hq.filter)
	if err != nil {
		return err
	}
	out := make([]api.AuditEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, api.AuditEntry{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action,
			Namespace: e.Namespace, Target: e.Target, Detail: e.Detail})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func csvResponse(w http.ResponseWriter, name string) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	return csv.NewWriter(w)
}

// csvRow defuses cells a spreadsheet would run as a formula (user names
// and reasons are user-controlled): they get a leading apostrophe.
func csvRow(cells ...string) []string {
	for i, c := range cells {
		if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			cells[i] = "'" + c
		}
	}
	return cells
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
