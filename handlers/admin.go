package handlers

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Admin is what the admin pages and API need of the claim service.
type Admin interface {
	Dashboard(ctx context.Context, id vdi.Identity) ([]vdi.PoolDashboard, error)
	Assign(ctx context.Context, id vdi.Identity, ref vdi.Ref, user string) (vdi.Desktop, error)
	RecreateJob(ctx context.Context, id vdi.Identity, ref vdi.Ref) (*vdi.Job, <-chan error, error)
	CreatePoolJob(ctx context.Context, id vdi.Identity, p vdi.Pool) (*vdi.Job, <-chan error, error)
	UpdatePoolJob(ctx context.Context, id vdi.Identity, namespace, name string, u vdi.PoolUpdate) (*vdi.Job, <-chan error, error)
	Job(ctx context.Context, id vdi.Identity, namespace, name string) (vdi.Job, error)
	Jobs(ctx context.Context, id vdi.Identity) ([]vdi.Job, error)
	CancelJob(ctx context.Context, id vdi.Identity, namespace, name string) (vdi.Job, error)
	DeletePool(ctx context.Context, id vdi.Identity, namespace, name string) error
	// Counters are what this portal counted since it started (metrics).
	Counters() vdi.Counters
}

// History reads console session history and the audit log.
type History interface {
	SessionHistory(ctx context.Context, f vdi.HistoryFilter) ([]vdi.Session, error)
	AuditHistory(ctx context.Context, f vdi.HistoryFilter) ([]vdi.AuditEntry, error)
	OpenSessions(ctx context.Context) ([]vdi.Session, error)
	LastPrune(ctx context.Context) (vdi.Pruned, bool, error)
}

// thumbEvery is how often the dashboard's thumbnails change.
const thumbEvery = 15 * time.Second

// adminOnly is the one guard of admin routes, pages and API alike
// (h.page(adminOnly(fn)), h.api(adminOnly(fn))): a non-admin is refused
// before anything of the request is read, so the handlers behind it do
// not check again.
func adminOnly(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
		if !id.Admin {
			return vdi.Errorf(vdi.EForbidden, "Ask an admin; admins are listed in CORRAL_VDI_ADMINS.", "Only admins may see this page.")
		}
		return fn(w, r, id)
	}
}

// handleAdminPage serves GET /admin: the pool dashboard.
func (h *adminPages) handleAdminPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	props, err := h.adminProps(r.Context(), id)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, views.Admin(props))
	return nil
}

// handleAdminLive serves GET /admin/live: the dashboard's live part, which
// the page fetches again every few seconds while it is visible. It is
// gzipped when the browser accepts it: a thousand rows are ~800 KB of
// HTML, ~35 KB compressed.
func (h *adminPages) handleAdminLive(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	props, err := h.adminProps(r.Context(), id)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := views.AdminLive(props).Render(r.Context(), &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept-Encoding")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Write(buf.Bytes())
		return nil
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	zw.Write(buf.Bytes())
	return zw.Close()
}

// adminProps reads the dashboard: pools, members, and each member's newest
// open console from the session history.
func (h *adminPages) adminProps(ctx context.Context, id vdi.Identity) (views.AdminProps, error) {
	pools, err := h.admin.Dashboard(ctx, id)
	if err != nil {
		return views.AdminProps{}, err
	}
	// The history is a cache: a database that does not answer leaves the
	// consoles' protocol and path out, and the notice says why.
	notice := h.notice()
	open, err := h.history.OpenSessions(ctx)
	if err != nil {
		h.log.Warn("dashboard without open sessions: the history database did not answer", "err", err)
		if notice == "" {
			notice = "The history database does not answer: consoles' protocols and paths are not shown. Claims and consoles keep working."
		}
	}
	newest := make(map[vdi.Ref]vdi.Session, len(open))
	for _, s := range open { // newest first: keep the first seen
		ref := vdi.Ref{Namespace: s.Namespace, Name: s.Member}
		if _, ok := newest[ref]; !ok {
			newest[ref] = s
		}
	}
	now := time.Now()
	props := views.AdminProps{Page: h.pageProps("Pools", id), Now: now, ThumbVersion: now.Unix() / int64(thumbEvery/time.Second),
		Pools: make([]views.AdminPool, len(pools)), Notice: notice, Cluster: h.cluster}
	for i, p := range pools {
		ap := views.AdminPool{PoolDashboard: p, Members: make([]views.AdminMember, len(p.Members))}
		for j, m := range p.Members {
			am := views.AdminMember{MemberStatus: m}
			if s, ok := newest[m.Ref()]; ok && m.Consoles > 0 {
				am.Protocol, am.Path = s.Protocol, s.Path
			}
			ap.Members[j] = am
		}
		props.Pools[i] = ap
	}
	return props, nil
}
