package handlers

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// formTime is how a datetime-local input sends a time (the portal's zone).
const formTime = "2006-01-02T15:04"

// historyQuery is a parsed history filter with the form's raw values.
type historyQuery struct {
	filter                   store.HistoryFilter
	user, pool, since, until string
	pools                    []string
}

// parseHistory reads ?user=&pool=ns/name&since=&until= and resolves the
// pool to its member names.
func (h *Handler) parseHistory(r *http.Request, id vdi.Identity) (historyQuery, error) {
	if err := requireAdmin(id); err != nil {
		return historyQuery{}, err
	}
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
		if err != nil {
			return hq, vdi.Errorf(vdi.EInvalid, "Write times as 2006-01-02T15:04.", "%q is not a time for %s.", b.in, b.name)
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
func (h *Handler) handleHistoryPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
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
	query := url.Values{}
	for k, v := range map[string]string{"user": hq.user, "pool": hq.pool, "since": hq.since, "until": hq.until} {
		if v != "" {
			query.Set(k, v)
		}
	}
	h.render(w, r, http.StatusOK, views.History(views.HistoryProps{
		Page: h.pageProps("History", id), User: hq.user, Pool: hq.pool, Since: hq.since, Until: hq.until,
		Pools: hq.pools, Sessions: sessions, Audit: audit, Query: query.Encode(),
	}))
	return nil
}

// handleSessionsCSV serves GET /admin/history/sessions.csv.
func (h *Handler) handleSessionsCSV(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
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
func (h *Handler) handleAuditCSV(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
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
