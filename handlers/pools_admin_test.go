package handlers

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestPoolsAdminAPI(t *testing.T) {
	h := mustAdminHandler(t, 1, 2)
	send := func(user, method, path, body string) (int, api.Error) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", user)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var e api.Error
		json.Unmarshal(rec.Body.Bytes(), &e)
		return rec.Code, e
	}
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"create", "POST", "/api/vdi/pools", `{"name": "lab", "size": 2, "policy": {"idleTimeout": "1h"}}`, 201},
		{"create twice", "POST", "/api/vdi/pools", `{"name": "lab", "size": 1}`, 409},
		{"bad name", "POST", "/api/vdi/pools", `{"name": "Lab!", "size": 1}`, 400},
		{"bad duration", "POST", "/api/vdi/pools", `{"name": "lab2", "policy": {"maxSession": "soon"}}`, 400},
		{"bad json", "POST", "/api/vdi/pools", `{"name":`, 400},
		{"patch nothing", "PATCH", "/api/vdi/pools/local/lab", `{}`, 400},
		{"resize", "PATCH", "/api/vdi/pools/local/lab", `{"size": 3}`, 200},
		{"resize too big", "PATCH", "/api/vdi/pools/local/lab", `{"size": 100000}`, 400},
		{"unknown pool", "PATCH", "/api/vdi/pools/local/nope", `{"size": 1}`, 404},
		{"delete", "DELETE", "/api/vdi/pools/local/lab", ``, 200},
		{"delete claimed", "DELETE", "/api/vdi/pools/local/pool0", ``, 409},
		{"assign held", "POST", "/api/vdi/desktops/local/pool0-1/assign", `{"user": "bob"}`, 409},
		{"assign nobody", "POST", "/api/vdi/desktops/local/pool0-2/assign", `{}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e := send("ops", tc.method, tc.path, tc.body)
			if code != tc.want {
				t.Errorf("%s %s %s = %d %+v; want %d", tc.method, tc.path, tc.body, code, e, tc.want)
			}
			if code >= 400 && e.Hint == "" {
				t.Errorf("%s %s: error %q has no hint", tc.method, tc.path, e.Msg)
			}
		})
	}
}

// recordingAdmin is the real admin service, noting the pools asked for.
type recordingAdmin struct {
	Admin
	created []vdi.Pool
}

func (r *recordingAdmin) CreatePoolJob(ctx context.Context, id vdi.Identity, p vdi.Pool) (*vdi.Job, <-chan error, error) {
	r.created = append(r.created, p)
	return r.Admin.CreatePoolJob(ctx, id, p)
}

// TestPoolCreateLicenses checks that the licences acknowledgement of a
// POST /api/vdi/pools body reaches CreatePool, and is off when not sent.
func TestPoolCreateLicenses(t *testing.T) {
	h := mustAdminHandler(t, 0, 0).(*Handler)
	rec := &recordingAdmin{Admin: h.pools.admin}
	h.pools.admin = rec
	for _, body := range []string{`{"name": "win", "size": 3, "licensesAcknowledged": true}`, `{"name": "lin", "size": 1}`} {
		req := httptest.NewRequest("POST", "/api/vdi/pools", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", "ops")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 201 {
			t.Fatalf("POST /api/vdi/pools %s = %d %s; want 201", body, w.Code, w.Body)
		}
	}
	if len(rec.created) != 2 || !rec.created[0].LicensesAcknowledged || rec.created[1].LicensesAcknowledged {
		t.Errorf("CreatePool got %+v; want win acknowledged, lin not", rec.created)
	}
}

func TestPolicyRequest(t *testing.T) {
	p, err := policyOf(api.Policy{DisconnectGrace: "5m", IdleTimeout: "1h30m"})
	if err != nil || p.DisconnectGrace != 5*time.Minute || p.IdleTimeout != 90*time.Minute || p.MaxSession != 0 {
		t.Errorf("policyOf = %+v, %v; want grace 5m, idle 1h30m, no max session", p, err)
	}
	if _, err := policyOf(api.Policy{MaxSession: "-1h"}); err == nil {
		t.Errorf("a negative max session was accepted")
	}
}
