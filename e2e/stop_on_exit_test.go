package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Issue 58, item 10: with --stop-desktops-on-exit nothing of the desktops
// outlives the portal. A SIGTERM stops them and unmounts every member's
// home and /tmp tmpfs, so the data dir can be removed; a SIGKILL cannot be
// honoured, so the next start says so and stops what the killed run left.
func TestStopOnExit_NothingOutlivesThePortal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root portal mounts its desktops' disk bounds")
	}
	data, err := os.MkdirTemp("", "cvd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeData(data) })
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true"}

	first := mustStartPortalIn(t, data, env...)
	d := mustClaim(t, first, "alice", "demo")
	xvnc := recordedPID(t, first, d.Name, "Xvnc")
	if m := mountsUnder(data); len(m) == 0 {
		t.Fatalf("alice's desktop runs with no disk bound mounted under %s", data)
	}
	first.Stop(t) // SIGTERM
	if m := mountsUnder(data); len(m) != 0 {
		t.Errorf("after SIGTERM with --stop-desktops-on-exit, still mounted: %v", m)
	}
	if alive(xvnc) {
		t.Errorf("Xvnc %d outlived the portal", xvnc)
	}

	second := mustStartPortalIn(t, data, env...)
	d = mustClaim(t, second, "bob", "demo")
	xvnc = recordedPID(t, second, d.Name, "Xvnc")
	sigkill(t, second)
	if !alive(xvnc) {
		t.Fatalf("Xvnc %d died with the SIGKILLed portal", xvnc)
	}
	third := mustStartPortalIn(t, data, env...)
	if !eventually(10*time.Second, func() bool { return !alive(xvnc) }) {
		t.Errorf("the next start left Xvnc %d of the killed run running", xvnc)
	}
	if !strings.Contains(third.Log(), "ended without stopping its desktops") {
		t.Errorf("the next start does not say the killed run left its desktops:\n%s", third.Log())
	}
	var after desktop
	if code := third.API(t, "bob", "GET", "/api/vdi/desktops/local/"+d.Name, &after); code != 200 || after.Power != "stopped" {
		t.Errorf("bob's desktop after the restart: %d %+v; want stopped, still his", code, after)
	}
	third.Stop(t)
	if m := mountsUnder(data); len(m) != 0 {
		t.Errorf("after the last SIGTERM, still mounted: %v", m)
	}
}
