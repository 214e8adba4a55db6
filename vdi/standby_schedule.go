package vdi

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zone names resolve on a machine without /usr/share/zoneinfo too
)

// StandbySchedule raises a pool's standby to at least Standby within
// working hours, so that the morning's first users find warm members
// instead of waiting for recreation: e.g. {"days": "mon-fri", "from":
// "08:00", "to": "18:00", "standby": 10, "timezone": "Europe/Berlin"}.
// Days lists days (mon,wed,fri) and ranges (mon-fri, sat-sun); From and
// To are 24-hour times in Timezone (an IANA zone, UTC when empty). A To
// before From is a window across midnight that starts on the days listed.
// The zero value is no schedule.
type StandbySchedule struct {
	Days     string `json:"days"`
	From     string `json:"from"`
	To       string `json:"to"`
	Standby  int    `json:"standby"`
	Timezone string `json:"timezone,omitempty"`
}

var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// IsZero reports whether s is no schedule.
func (s StandbySchedule) IsZero() bool { return s == StandbySchedule{} }

// String is s as the dashboard and the audit log show it.
func (s StandbySchedule) String() string {
	if s.IsZero() {
		return "none"
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return fmt.Sprintf("%d on %s %s-%s %s", s.Standby, s.Days, s.From, s.To, tz)
}

// Floor returns the standby s asks for at now: its Standby within its
// hours, 0 outside them (and for no schedule). s must be valid.
func (s StandbySchedule) Floor(now time.Time) int {
	if s.IsZero() {
		return 0
	}
	days, _ := parseDays(s.Days)
	from, _ := parseClock(s.From)
	to, _ := parseClock(s.To)
	loc, err := loadZone(s.Timezone)
	if err != nil {
		return 0
	}
	t := now.In(loc)
	at := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
	today, yesterday := int(t.Weekday()), (int(t.Weekday())+6)%7
	var in bool
	if from < to {
		in = days[today] && at >= from && at < to
	} else {
		in = days[today] && at >= from || days[yesterday] && at < to
	}
	if in {
		return s.Standby
	}
	return 0
}

// validSchedule refuses a schedule with an unknown day, a bad time or an
// unknown zone, saying what to write.
func validSchedule(s StandbySchedule) error {
	if s.IsZero() {
		return nil
	}
	if _, err := parseDays(s.Days); err != nil {
		return Errorf(EInvalid, `Write days as names and ranges of sun mon tue wed thu fri sat, e.g. "mon-fri" or "mon,wed,fri".`,
			"Standby schedule days %q: %v.", s.Days, err)
	}
	for _, c := range []struct{ name, v string }{{"from", s.From}, {"to", s.To}} {
		if _, err := parseClock(c.v); err != nil {
			return Errorf(EInvalid, `Write times as 24-hour HH:MM, e.g. "from": "08:00", "to": "18:00".`,
				"Standby schedule %s %q is not a time of day.", c.name, c.v)
		}
	}
	if s.From == s.To {
		return Errorf(EInvalid, `Give the hours the floor holds, e.g. "from": "08:00", "to": "18:00".`,
			"Standby schedule from and to are both %s: an empty window.", s.From)
	}
	if _, err := loadZone(s.Timezone); err != nil {
		return Errorf(EInvalid, `Write an IANA time zone such as "Europe/Berlin" or "America/New_York", or leave it out for UTC.`,
			"Standby schedule time zone %q is unknown.", s.Timezone)
	}
	if s.Standby < 1 || s.Standby > MaxPoolSize {
		return Errorf(EInvalid, fmt.Sprintf("Write how many members to keep warm within those hours, 1 to %d.", MaxPoolSize),
			"Standby schedule standby %d is out of range.", s.Standby)
	}
	return nil
}

// parseDays reads "mon-fri,sun" into the set of weekdays it names.
func parseDays(v string) ([7]bool, error) {
	var set [7]bool
	day := func(s string) (int, error) {
		s = strings.ToLower(strings.TrimSpace(s))
		for i, d := range weekdays {
			if s == d {
				return i, nil
			}
		}
		return 0, fmt.Errorf("unknown day %q", s)
	}
	if strings.TrimSpace(v) == "" {
		return set, fmt.Errorf("no days")
	}
	for _, part := range strings.Split(v, ",") {
		a, b, isRange := strings.Cut(part, "-")
		first, err := day(a)
		if err != nil {
			return set, err
		}
		last := first
		if isRange {
			if last, err = day(b); err != nil {
				return set, err
			}
		}
		for i := first; ; i = (i + 1) % 7 {
			set[i] = true
			if i == last {
				break
			}
		}
	}
	return set, nil
}

// parseClock reads "08:00" as the time since midnight.
func parseClock(v string) (time.Duration, error) {
	t, err := time.Parse("15:04", v)
	if err != nil {
		return 0, err
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// loadZone returns the zone name (UTC when empty).
func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}
