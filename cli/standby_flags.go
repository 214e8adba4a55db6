package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// standbyFlagSet holds the flags of a pool's warm standby; unset flags
// change nothing.
type standbyFlagSet struct {
	fs                             *Flags
	n, min, max                    int
	schedule                       string
	nSet, minSet, maxSet, schedSet bool
}

// standbyFlags adds -standby, -standby-min, -standby-max and
// -standby-schedule to f.
func standbyFlags(f *Flags) *standbyFlagSet {
	s := &standbyFlagSet{fs: f}
	f.IntVar(&s.n, "standby", 0, "free desktops kept powered on, so that a claim needs no boot; 0: none")
	f.IntVar(&s.min, "standby-min", 0, "with -standby-max: follow demand, keeping at least this many free desktops on")
	f.IntVar(&s.max, "standby-max", 0, "with -standby-min: follow demand (enough for the claims that arrive while a member starts), keeping at most this many on")
	f.StringVar(&s.schedule, "standby-schedule", "", `keep at least N on in working hours: "DAYS HH:MM-HH:MM N [ZONE]", e.g. "mon-fri 08:00-18:00 10 Europe/Berlin" (or its JSON); "none" removes it`)
	return s
}

// set notes which flags were given; call it after parsing.
func (s *standbyFlagSet) set() {
	s.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "standby":
			s.nSet = true
		case "standby-min":
			s.minSet = true
		case "standby-max":
			s.maxSet = true
		case "standby-schedule":
			s.schedSet = true
		}
	})
}

// standby returns the standby the flags give, or nil when none was given.
func (s *standbyFlagSet) standby() (*vdi.Standby, error) {
	s.set()
	switch {
	case s.nSet && (s.minSet || s.maxSet):
		return nil, usagef("-standby N is a fixed standby; to follow demand give -standby-min and -standby-max instead")
	case s.nSet:
		st := vdi.Fixed(s.n)
		return &st, nil
	case s.minSet || s.maxSet:
		st := vdi.Standby{Min: s.min, Max: s.max}
		if !s.maxSet {
			st.Max = s.min
		}
		return &st, nil
	}
	return nil, nil
}

// standbySchedule returns the schedule the flag gives ({} for "none"), or
// nil when it was not given.
func (s *standbyFlagSet) standbySchedule() (*vdi.StandbySchedule, error) {
	s.set()
	if !s.schedSet {
		return nil, nil
	}
	sched, err := parseSchedule(s.schedule)
	if err != nil {
		return nil, usagef("-standby-schedule %q: %v", s.schedule, err)
	}
	return &sched, nil
}

// parseSchedule reads "mon-fri 08:00-18:00 10 Europe/Berlin" (the zone may
// be left out for UTC), its JSON, or "none". The portal checks the days,
// times and zone.
func parseSchedule(v string) (vdi.StandbySchedule, error) {
	v = strings.TrimSpace(v)
	var sched vdi.StandbySchedule
	switch {
	case v == "" || v == "none":
		return sched, nil
	case strings.HasPrefix(v, "{"):
		err := json.Unmarshal([]byte(v), &sched)
		return sched, err
	}
	f := strings.Fields(v)
	if len(f) < 3 || len(f) > 4 {
		return sched, fmt.Errorf(`write DAYS HH:MM-HH:MM N [ZONE], e.g. "mon-fri 08:00-18:00 10 Europe/Berlin"`)
	}
	from, to, ok := strings.Cut(f[1], "-")
	if !ok {
		return sched, fmt.Errorf(`write the hours as HH:MM-HH:MM, e.g. 08:00-18:00`)
	}
	if _, err := fmt.Sscan(f[2], &sched.Standby); err != nil {
		return sched, fmt.Errorf(`write how many to keep on as a number after the hours, e.g. "mon-fri 08:00-18:00 10"`)
	}
	sched.Days, sched.From, sched.To = f[0], from, to
	if len(f) == 4 {
		sched.Timezone = f[3]
	}
	return sched, nil
}
