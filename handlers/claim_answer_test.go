package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaim_AnswersBeforeLockLetGo: the claim routes send their whole
// answer (the JSON desktop, the form's redirect) before the claim lets
// its user's claim lock go: two writes before the answer on Kubernetes,
// not three. The client reads the answer to its end while the lock's
// delete waits for it.
func TestClaim_AnswersBeforeLockLetGo(t *testing.T) {
	e := mustTestEnv(t, testEnvConfig{})
	for _, tc := range []struct {
		name, path string
		code       int
		want       string // in the body, or the redirect's Location
	}{
		{"api", "/api/vdi/pools/local/api/claim", 200, `"name":"api-1"`},
		{"form", "/pools/local/form/claim", http.StatusSeeOther, "/desktops/local/form-1"},
		{"kiosk", "/kiosk/kiosk?ns=local", http.StatusSeeOther, "/kiosk/kiosk?ns=local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leases := leasetest.NewLockDeleteAwaits(e.db.Leases())
			svc := vdi.NewService(vdi.Config{Backend: leasetest.NewPool("local", tc.name, 1, 1), Leases: leases, Audit: e.db, Log: e.log})
			srv := httptest.NewServer(New(Config{Desktops: svc, Auth: e.auth, Sessions: e.db, Assets: e.assets, Log: e.log,
				PublicURLs: []string{"http://example.com"}}))
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL+tc.path, nil)
			req.Host = "example.com"
			req.Header.Set("Tailscale-User-Login", "user-"+tc.name)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			close(leases.Read)
			if got := string(b) + res.Header.Get("Location"); err != nil || res.StatusCode != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("POST %s: %d %.200q %v; want %d with %s", tc.path, res.StatusCode, got, err, tc.code, tc.want)
			}
			if first := <-leases.Unlocked; !first {
				t.Errorf("POST %s: the answer ended only after the claim lock's delete gave up waiting; want the answer first", tc.path)
			}
		})
	}
}
