package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
)

// TestPostgres_SharedHistory runs two portal binaries with their own data
// dirs on one real PostgreSQL (the password from a file, not the URL): an
// audit row written through one is listed by the other, and a portal
// started again on an empty data dir, as a new pod would be, still lists
// it. A wrong password stops the portal with one clear line.
func TestPostgres_SharedHistory(t *testing.T) {
	pg := testpg.Shared(t)
	url := pg.NewDatabase(t)
	bare := strings.Replace(url, ":"+testpg.Password+"@", "@", 1)
	pwFile := filepath.Join(t.TempDir(), "db-password")
	must(t, os.WriteFile(pwFile, []byte(testpg.Password+"\n"), 0o600))
	env := []string{"CORRAL_VDI_DATABASE_URL=" + bare, "CORRAL_VDI_DATABASE_PASSWORD_FILE=" + pwFile,
		"CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops"}
	one, two := MustStartPortal(t, env...), MustStartPortal(t, env...)

	if code := one.API(t, "ops", "POST", "/api/vdi/users/mallory/end-sessions", nil); code != 200 {
		t.Fatalf("end mallory's sessions through one: %d", code)
	}
	listed := func(p *Portal) bool {
		var rows []struct {
			Action, Target, Actor string
		}
		if code := p.API(t, "ops", "GET", "/api/vdi/history/audit?limit=100", &rows); code != 200 {
			t.Fatalf("audit: %d", code)
		}
		for _, r := range rows {
			if r.Action == "end-sessions" && r.Actor == "ops" {
				return true
			}
		}
		return false
	}
	if !listed(two) {
		t.Error("the other portal does not list the audit row written through the first")
	}
	two.Stop(t)
	fresh := MustStartPortal(t, env...) // a new, empty data dir
	if !listed(fresh) {
		t.Error("a portal on an empty data dir does not list the audit row: history did not survive the pod")
	}
	if strings.Contains(one.Log(), testpg.Password) {
		t.Error("the portal's log holds the database password")
	}

	t.Run("WrongPassword", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "db-password")
		must(t, os.WriteFile(bad, []byte("not-it\n"), 0o600))
		out, err := runPortal(t, "CORRAL_VDI_DATABASE_URL="+bare, "CORRAL_VDI_DATABASE_PASSWORD_FILE="+bad, "CORRAL_VDI_DEMO_POOL_SIZE=0")
		if err == nil || !strings.Contains(out, "user name or password is wrong") || strings.Contains(out, "not-it") {
			t.Errorf("portal with a wrong database password said:\n%s\nwant one line saying the password is wrong, without it", out)
		}
	})
}
