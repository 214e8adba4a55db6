package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// mustRecordingsHandler returns handlers with a recording store holding
// one finished terminal recording of alice, and its id.
func mustRecordingsHandler(tb testing.TB, opts ...func(*Config)) (http.Handler, *store.DB, string) {
	tb.Helper()
	ctx := context.Background()
	e := mustTestEnv(tb, testEnvConfig{Admins: []string{"ops"}})
	db := e.db
	recs, err := recording.Open(ctx, recording.Config{Dir: filepath.Join(e.dir, "recordings"), DB: db, Log: e.log})
	if err != nil {
		tb.Fatal(err)
	}
	const id = "00112233445566778899aabb"
	rs, err := recs.Start(ctx, id, "alice", vdi.Ref{Namespace: "local", Name: "exam-1"}, vdi.ProtocolTerminal, false)
	if err != nil {
		tb.Fatal(err)
	}
	rs.Output([]byte("hello <b>\r\n"))
	rs.Close(ctx)
	pool := leasetest.NewPool("local", "exam", 1, 1)
	pool.Policy = vdi.Policy{Record: true}
	svc := vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Log: e.log})
	cfg := Config{Desktops: svc, Auth: e.auth, Sessions: db, Recordings: recs, Assets: e.assets, History: db, Log: e.log,
		PublicURLs: []string{"http://example.com"}} // httptest.NewRequest's Host
	for _, o := range opts {
		o(&cfg)
	}
	return New(cfg), db, id
}

func TestRecordings(t *testing.T) {
	h, db, id := mustRecordingsHandler(t)
	t.Run("List", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			code  int
			n     int
		}{
			{"", 200, 1},
			{"?desktop=local/exam-1&user=alice&since=2006-01-02T15:04", 200, 1},
			{"?user=bob", 200, 0},
			{"?desktop=exam-1", 400, 0},
			{"?until=tomorrow", 400, 0},
		} {
			rec := adminGet(h, "ops", "/api/vdi/recordings"+tc.query)
			var got []recordingJSON
			if rec.Code != tc.code {
				t.Errorf("recordings%s = %d %s; want %d", tc.query, rec.Code, rec.Body, tc.code)
			} else if tc.code == 200 && (json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got) != tc.n) {
				t.Errorf("recordings%s = %s; want %d", tc.query, rec.Body, tc.n)
			} else if tc.n == 1 && (got[0].Desktop != "local/exam-1" || got[0].Session != id || got[0].End == nil || got[0].Bytes == 0) {
				t.Errorf("recordings%s = %+v; want alice's finished recording of local/exam-1", tc.query, got[0])
			}
		}
	})
	t.Run("Download", func(t *testing.T) {
		rec := adminGet(h, "ops", "/api/vdi/recordings/"+id)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-asciicast" || !strings.Contains(rec.Body.String(), `hello \u003cb\u003e`) {
			t.Errorf("download = %d %s %q; want the asciicast", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	})
	t.Run("Playback", func(t *testing.T) {
		rec := adminGet(h, "ops", "/admin/recordings/"+id)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `data-testid="player"`) || !strings.Contains(rec.Body.String(), `data-kind="terminal"`) {
			t.Errorf("playback page = %d; want the terminal player:\n%s", rec.Code, rec.Body)
		}
		audit, _ := db.AuditLog(context.Background(), 10)
		if len(audit) < 2 || audit[0].Action != recording.ActionPlay || audit[1].Action != recording.ActionDownload {
			t.Errorf("audit = %+v; want the download and the playback", audit)
		}
	})
	t.Run("ErrForbidden", func(t *testing.T) {
		for _, path := range []string{"/api/vdi/recordings", "/api/vdi/recordings/" + id, "/admin/recordings/" + id, "/admin/recordings"} {
			if rec := adminGet(h, "alice", path); rec.Code != http.StatusForbidden {
				t.Errorf("%s as alice = %d; want 403", path, rec.Code)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, path := range []string{"/api/vdi/recordings/..%2Fportal.db", "/api/vdi/recordings/ffffffffffffffffffffffff", "/admin/recordings/%2e%2e"} {
			if rec := adminGet(h, "ops", path); rec.Code != http.StatusNotFound {
				t.Errorf("%s = %d %s; want 404", path, rec.Code, rec.Body)
			}
		}
	})
}

// An admin deletes a recording through the API (a non-admin and a
// cross-site request are refused first) and through the page's form.
func TestRecordingDelete(t *testing.T) {
	do := func(h http.Handler, method, user, path string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", user)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	h, db, id := mustRecordingsHandler(t)
	if rec := do(h, "DELETE", "alice", "/api/vdi/recordings/"+id); rec.Code != http.StatusForbidden {
		t.Errorf("DELETE as alice = %d %s; want 403", rec.Code, rec.Body)
	}
	if rec := do(h, "DELETE", "ops", "/api/vdi/recordings/"+id, "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"); rec.Code != http.StatusForbidden {
		t.Errorf("cross-site DELETE as ops = %d %s; want 403", rec.Code, rec.Body)
	}
	if rec := do(h, "POST", "ops", "/admin/recordings/"+id+"/delete", "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"); rec.Code != http.StatusForbidden {
		t.Errorf("cross-site delete form as ops = %d; want 403", rec.Code)
	}
	if rec := adminGet(h, "ops", "/admin/recordings"); !strings.Contains(rec.Body.String(), `data-testid="delete-recording"`) {
		t.Errorf("recordings page has no delete button:\n%s", rec.Body)
	}
	if rec := do(h, "DELETE", "ops", "/api/vdi/recordings/"+id); rec.Code != 200 {
		t.Fatalf("DELETE as ops = %d %s; want 200", rec.Code, rec.Body)
	}
	if rec := adminGet(h, "ops", "/api/vdi/recordings/"+id); rec.Code != http.StatusNotFound {
		t.Errorf("download after delete = %d; want 404", rec.Code)
	}
	if rec := do(h, "DELETE", "ops", "/api/vdi/recordings/"+id); rec.Code != http.StatusNotFound {
		t.Errorf("second DELETE = %d; want 404", rec.Code)
	}
	audit, _ := db.AuditLog(context.Background(), 10)
	if len(audit) == 0 || audit[0].Action != recording.ActionDelete || audit[0].Actor != "ops" {
		t.Errorf("audit = %+v; want ops's delete", audit)
	}

	h, _, id = mustRecordingsHandler(t)
	rec := do(h, "POST", "ops", "/admin/recordings/"+id+"/delete", "Sec-Fetch-Site", "same-origin")
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "deleted="+id) {
		t.Errorf("delete form = %d %v; want a redirect to the list saying it was deleted", rec.Code, rec.Header())
	}
}

// An admin's change is refused, saying why, when the audit log could not
// keep its row; reading goes on, and so do users' own requests.
func TestAdminChangeWithoutAuditRoom(t *testing.T) {
	h, _, id := mustRecordingsHandler(t, func(c *Config) { c.AuditRoom = func() error { return store.ErrAuditFull } })
	req := httptest.NewRequest("DELETE", "/api/vdi/recordings/"+id, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Tailscale-User-Login", "ops")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "audit log cannot keep") {
		t.Errorf("DELETE with no audit room = %d %s; want 503 saying the audit log cannot keep it", rec.Code, rec.Body)
	}
	if rec := adminGet(h, "ops", "/api/vdi/recordings/"+id); rec.Code != 200 {
		t.Errorf("the recording after the refused delete = %d; want still there", rec.Code)
	}
}
