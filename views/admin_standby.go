package views

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// standbyText says what a pool's standby keeps warm: "standby 2: 1 warm",
// "standby 1-20 by demand, 4 wanted now: 3 warm", and its working hours
// ("at least 10 on mon-fri 08:00-18:00 Europe/Berlin").
func standbyText(p vdi.PoolDashboard) string {
	var b strings.Builder
	if p.Standby.Follows() {
		fmt.Fprintf(&b, "standby %s by demand, %d wanted now", p.Standby, p.StandbyNow)
	} else {
		fmt.Fprintf(&b, "standby %d", p.StandbyNow)
	}
	fmt.Fprintf(&b, ": %d warm", p.Warm)
	if !p.StandbySchedule.IsZero() {
		fmt.Fprintf(&b, " · at least %s", p.StandbySchedule)
	}
	return b.String()
}

// scheduleEntry is sched as the dashboard's field takes it:
// "mon-fri 08:00-18:00 10 Europe/Berlin", "" for none.
func scheduleEntry(sched vdi.StandbySchedule) string {
	if sched.IsZero() {
		return ""
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s-%s %d %s", sched.Days, sched.From, sched.To, sched.Standby, sched.Timezone))
}
