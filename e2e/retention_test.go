package e2e

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRetention_NobodyFlushesTheAdmins fills the audit log as one user,
// then restarts the portal with a row cap of 1: that user keeps only
// their newest row, another user's row and the admin's force-release
// stay, and the history page says that rows were pruned.
func TestRetention_NobodyFlushesTheAdmins(t *testing.T) {
	data, err := os.MkdirTemp("", "cvd")
	must(t, err)
	t.Cleanup(func() { removeData(data) })
	p := mustStartPortalIn(t, data, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=2")
	var d desktop
	p.API(t, "bob", "POST", "/api/vdi/pools/local/demo/claim", &d)
	if code := p.API(t, "ops", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
		t.Fatalf("force-release: %d", code)
	}
	for range 3 {
		p.API(t, "mallory", "POST", "/api/vdi/pools/local/demo/claim", &d)
		p.API(t, "mallory", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil)
	}
	p.Stop(t)

	p = mustStartPortalIn(t, data, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_HISTORY_MAX_ROWS=1")
	var body string
	historyPage := func() string { // retention runs right after the start, alongside serving
		req, _ := http.NewRequest("GET", p.URL+"/admin/history", nil)
		req.Header.Set("Tailscale-User-Login", "ops")
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		buf, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(buf)
	}
	waitFor(t, 10*time.Second, "the history page to say rows were pruned", func() bool {
		body = historyPage()
		return strings.Contains(body, `data-testid="pruned"`)
	})
	if !strings.Contains(body, "5 audit rows") {
		t.Errorf("history page does not say 5 audit rows were pruned:\n%s", body)
	}
	var rows []auditRow
	p.API(t, "ops", "GET", "/api/vdi/history/audit", &rows)
	by := map[string]int{}
	for _, r := range rows {
		by[r.Actor+" "+r.Action]++
	}
	if by["ops force-release"] != 1 || by["bob claim"] != 1 || by["mallory claim"]+by["mallory release"] != 1 {
		t.Errorf("audit after pruning to 1 row per actor: %v; want ops's force-release, bob's claim and mallory's newest row", by)
	}
}
