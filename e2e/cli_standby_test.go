package e2e

import (
	"strings"
	"testing"
)

// TestCLI_PoolStandby sets a pool's standby to follow demand and its
// working hours from the CLI, reads it back, and checks that bad input is
// refused with what to write.
func TestCLI_PoolStandby(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	p.mustCLI(t, "pool", "create", "office", "--from", "session", "--size", "2", "-standby-min", "0", "-standby-max", "2")
	out := p.mustCLI(t, "pool", "update", "local/office", "-standby-schedule", "sat-sun 01:00-02:00 1 Europe/Berlin")
	if !strings.Contains(out, "standby 0-2") || !strings.Contains(out, "1 on sat-sun 01:00-02:00 Europe/Berlin") {
		t.Errorf("pool update printed %q; want the standby 0-2 and the schedule", out)
	}
	var pools []struct {
		Name            string         `json:"name"`
		Standby         any            `json:"standby"`
		StandbySchedule map[string]any `json:"standbySchedule"`
	}
	if code := p.API(t, "ops", "GET", "/api/vdi/pools", &pools); code != 200 || len(pools) != 1 {
		t.Fatalf("pools: %d %+v", code, pools)
	}
	if st, ok := pools[0].Standby.(map[string]any); !ok || st["min"] != 0.0 || st["max"] != 2.0 || pools[0].StandbySchedule["timezone"] != "Europe/Berlin" {
		t.Errorf("the API shows standby %v, schedule %v; want {min 0, max 2} and the Berlin schedule", pools[0].Standby, pools[0].StandbySchedule)
	}
	p.mustCLI(t, "pool", "update", "local/office", "-standby", "1", "-standby-schedule", "none")
	if !auditHas(t, p, "", "pool-standby", "office", "standby 0-2 -> 1", "-> none") {
		t.Error("the audit log has no pool-standby row for the change back to 1")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pool", "update", "local/office", "-standby-min", "5", "-standby-max", "2"}, `{"min": 2, "max": 5}`},
		{[]string{"pool", "update", "local/office", "-standby", "2", "-standby-max", "4"}, "-standby-min and -standby-max instead"},
		{[]string{"pool", "update", "local/office", "-standby-schedule", "weekdays 08:00-18:00 2"}, "mon-fri"},
		{[]string{"pool", "update", "local/office", "-standby-schedule", "mon-fri 8-18 2"}, "HH:MM"},
		{[]string{"pool", "update", "local/office", "-standby-schedule", "mon-fri 08:00-18:00 2 Mars/Olympus"}, "IANA"},
	} {
		if _, errOut, code := p.cli(t, tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error saying %q", tc.args, code, errOut, tc.want)
		}
	}
}
