package cli

import (
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want vdi.StandbySchedule
	}{
		{"mon-fri 08:00-18:00 10 Europe/Berlin", vdi.StandbySchedule{Days: "mon-fri", From: "08:00", To: "18:00", Standby: 10, Timezone: "Europe/Berlin"}},
		{"sat 22:00-02:00 3", vdi.StandbySchedule{Days: "sat", From: "22:00", To: "02:00", Standby: 3}},
		{`{"days": "mon", "from": "09:00", "to": "10:00", "standby": 1}`, vdi.StandbySchedule{Days: "mon", From: "09:00", To: "10:00", Standby: 1}},
		{"none", vdi.StandbySchedule{}},
	} {
		if got, err := parseSchedule(tc.in); err != nil || got != tc.want {
			t.Errorf("parseSchedule(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"mon-fri 08:00 10", "mon-fri 08:00-18:00 ten", "mon-fri", "a b c d e"} {
		if got, err := parseSchedule(bad); err == nil {
			t.Errorf("parseSchedule(%q) = %+v; want an error saying how to write it", bad, got)
		}
	}
}
