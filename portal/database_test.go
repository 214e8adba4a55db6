package portal

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestKubePortal_DatabaseStopsAnswering runs a kube-backend portal on a
// real PostgreSQL and stops the database: claims (Leases) keep working,
// /readyz stays ready and says history is degraded, the audit rows wait
// in memory, and when the database answers again they are written.
func TestKubePortal_DatabaseStopsAnswering(t *testing.T) {
	c := testcluster.Shared(t)
	c.StartKubeVirtStandIn(t)
	c.Apply(t, "../deploy/rbac.yaml")
	ns := c.Namespace(t)
	testcluster.StoppedVM(t, c.AdminClient(t), ns, "desk-1", map[string]string{vdi.LabelPool: "desk"})
	pg := testpg.Shared(t)
	url := pg.NewDatabase(t)
	m := startKubePortal(t, testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)), ns, "CORRAL_VDI_DATABASE_URL="+url, "CORRAL_VDI_AUTH=tailscale,dev")
	get := func(method, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, m.URL()+path, nil)
		req.Header.Set("Tailscale-User-Login", "alice")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if out != nil {
			json.Unmarshal(b, out)
		}
		return res.StatusCode
	}

	pg.Pause(t, true)
	paused := true
	defer func() {
		if paused {
			pg.Pause(t, false)
		}
	}()
	var d vdi.Desktop
	if code := get("POST", "/api/vdi/pools/"+ns+"/desk/claim", &d); code != 200 || d.Holder != "alice" {
		t.Fatalf("claim while the database is stopped: %d %+v; want the desktop (claims are Leases)", code, d)
	}
	var ready map[string]string
	if code := get("GET", "/readyz", &ready); code != 200 || !strings.Contains(ready["degraded"], "does not answer") {
		t.Errorf("/readyz while the database is stopped: %d %v; want ready, saying history is degraded", code, ready)
	}
	pg.Pause(t, false)
	paused = false

	deadline := time.Now().Add(30 * time.Second)
	for {
		ready = nil
		if code := get("GET", "/readyz", &ready); code == 200 && ready["degraded"] == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30s after the database answers again: %v; want nothing degraded", ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
	db, err := store.OpenPostgres(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries, err := db.AuditLog(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	claims := 0
	for _, e := range entries {
		if e.Action == "claim" && e.Target == "desk-1" && e.Actor == "alice" {
			claims++
		}
	}
	if claims != 1 {
		t.Errorf("the claim's audit rows once the database answers: %d; want exactly 1 (kept, then written once): %+v", claims, entries)
	}
}
