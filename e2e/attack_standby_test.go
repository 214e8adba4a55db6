package e2e

import (
	"net/http"
	"testing"
)

// standbyAttacks are the rows of a pool's warm standby: starting desktops
// is an admin's decision, and not even an admin starts more than a pool
// may have, however the standby is written.
func standbyAttacks() []attack {
	return []attack{
		{
			name: "UserSchedulesEveryDesktopOn",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/pools/local/demo",
					`{"standbySchedule": {"days": "sun-sat", "from": "00:00", "to": "23:59", "standby": 500}}`, "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		{
			name: "AdminStandbyBeyondAnyPool",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/pools/local/demo", `{"standby": {"min": 1, "max": 100000}}`, "Tailscale-User-Login", admin)
			},
			status: 400, says: "out of range",
		},
		{
			name: "AdminScheduleInAZoneThatIsAPath",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/pools/local/demo",
					`{"standbySchedule": {"days": "mon", "from": "08:00", "to": "18:00", "standby": 1, "timezone": "../../../../etc/passwd"}}`, "Tailscale-User-Login", admin)
			},
			status: 400, says: "IANA time zone",
		},
	}
}
