package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
)

// outageSessionKey is the cookie key both replicas share, so that a
// cookie from one is good on the other.
const outageSessionKey = "b3V0YWdlLXNlc3Npb24ta2V5LTAxMjM0NTY3ODlhYmNkZWY="

// TestAttack_PostgresOutage runs two replicas on one real PostgreSQL and
// stops the server. An admin ends dan's sessions (told it holds on this
// replica only until written), mallory floods the audit buffer with
// sign-ins, and the admin goes on ending sessions until the buffer is
// full of admin rows: the next admin change is refused, saying why. When
// the server answers again, every admin row is in the audit log (the
// flood was shed instead) and the other replica refuses dan's cookie.
func TestAttack_PostgresOutage(t *testing.T) {
	pg := testpg.Shared(t)
	env := []string{"CORRAL_VDI_DATABASE_URL=" + pg.NewDatabase(t), "CORRAL_VDI_SESSION_KEYS=" + outageSessionKey,
		"CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=" + admin, "CORRAL_VDI_HISTORY_BUFFER_ROWS=20"}
	one, two := MustStartPortal(t, env...), MustStartPortal(t, env...)
	dan, erin := signInByName(t, one, "dan"), signInByName(t, one, "erin")
	if code := get(t, two.URL+"/api/vdi/desktops", dan); code != 200 {
		t.Fatalf("dan's cookie on the other replica before: %d", code)
	}
	pg.Pause(t, true)
	paused := true
	defer func() {
		if paused {
			pg.Pause(t, false)
		}
	}()
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(p *Portal, user, path string) (int, string) {
		req, _ := http.NewRequest("POST", p.URL+path, nil)
		req.Header.Set("Tailscale-User-Login", user)
		res, err := client.Do(req)
		must(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	code, body := post(one, admin, "/api/vdi/users/dan/end-sessions")
	if code != 503 || !strings.Contains(body, "this portal server only") {
		t.Errorf("end-sessions during the outage: %d %s; want 503 saying it holds on this replica until written", code, body)
	}
	if code := get(t, one.URL+"/api/vdi/desktops", dan); code != 401 {
		t.Errorf("dan's cookie on the replica that ended his sessions: %d; want 401", code)
	}
	// erin signs out herself: told that it does not hold everywhere yet.
	req, _ := http.NewRequest("POST", one.URL+"/signout", nil)
	req.AddCookie(erin)
	req.Header.Set("Origin", one.URL)
	res, err := client.Do(req)
	must(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || !strings.Contains(string(page), "could not save your sign-out yet") {
		t.Errorf("erin's sign-out during the outage: %d; want 503 telling her it is not saved yet:\n%s", res.StatusCode, page)
	}
	noRedirect := http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 60 {
		res, err := noRedirect.PostForm(one.URL+"/signin", url.Values{"login": {fmt.Sprintf("mallory%d", i)}, "next": {"/"}})
		must(t, err)
		res.Body.Close()
	}
	ended, refused := []string{"dan"}, ""
	for i := range 30 {
		login := fmt.Sprintf("user%d", i)
		code, body := post(one, admin, "/api/vdi/users/"+login+"/end-sessions")
		if strings.Contains(body, "audit log cannot keep") {
			refused = body
			if code != 503 {
				t.Errorf("the refused admin change answered %d; want 503", code)
			}
			break
		}
		ended = append(ended, login)
	}
	if refused == "" {
		t.Fatalf("30 admin changes with the audit buffer (20 rows) full: none refused")
	}
	if !strings.Contains(refused, "history database") {
		t.Errorf("refusal does not say what to do: %s", refused)
	}
	pg.Pause(t, false)
	paused = false

	waitFor(t, 20*time.Second, "the other replica to refuse dan's cookie once the sign-out is written", func() bool {
		return get(t, two.URL+"/api/vdi/desktops", dan) == 401
	})
	waitFor(t, 20*time.Second, "the other replica to refuse erin's cookie once her sign-out is written", func() bool {
		return get(t, two.URL+"/api/vdi/desktops", erin) == 401
	})
	var rows []auditRow
	waitFor(t, 20*time.Second, "every admin row to be written", func() bool {
		rows = nil
		two.API(t, admin, "GET", "/api/vdi/history/audit?limit=1000", &rows)
		n := 0
		for _, r := range rows {
			if r.Actor == admin && r.Action == "end-sessions" {
				n++
			}
		}
		return n == len(ended)
	})
	signIns := 0
	for _, r := range rows {
		if r.Action == "sign-in" && strings.HasPrefix(r.Actor, "mallory") {
			signIns++
		}
	}
	if signIns >= 60 {
		t.Errorf("all %d of mallory's sign-ins were kept; want the flood shed to keep the admin rows", signIns)
	}
	t.Logf("kept %d admin rows through the outage, %d of 60 flood rows; admin change %d refused", len(ended), signIns, len(ended)+1)
}
