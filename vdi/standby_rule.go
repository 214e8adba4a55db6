package vdi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Standby is how many free members of a pool are kept powered on and
// ready, so that a claim needs no boot (see KeepStandby). Min == Max is a
// fixed number (JSON: a plain number, as before); Min < Max follows demand
// (JSON: {"min": 1, "max": 20}): the standby covers the claims that
// arrive while a member starts (see Want).
type Standby struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Fixed returns the standby of n members whatever the demand.
func Fixed(n int) Standby { return Standby{Min: n, Max: n} }

// Demand-following standby: the recent claim rate is the pool's Leases
// acquired within StandbyWindow (every replica's claims, from the Leases
// themselves, so the leader that keeps standby sees them all), and the
// start time is the mean of the pool's last standby starts on this
// replica (DefaultStartTime before one finished).
const (
	StandbyWindow    = 10 * time.Minute
	DefaultStartTime = time.Minute
)

// Follows reports whether st follows demand (Min < Max).
func (st Standby) Follows() bool { return st.Min < st.Max }

// IsZero reports whether st keeps no standby at all.
func (st Standby) IsZero() bool { return st.Max <= 0 }

// Want returns how many members st keeps warm given claims, the claims in
// the last StandbyWindow, start, how long a member takes to start, and
// shares, how many replicas' shares of the members the claims arrive at
// (claim_share.go; 1 when they share none): the claims expected at each
// share while one of its members starts (the rate ÷ shares × start time,
// rounded up), for every share, clamped to Min..Max. Each replica's
// claims then find a warm member in its own share, where they race no
// other replica's. A fixed standby is its number.
func (st Standby) Want(claims int, start time.Duration, shares int) int {
	if !st.Follows() {
		return st.Max
	}
	shares = max(shares, 1)
	each := math.Ceil(float64(claims) * start.Seconds() / StandbyWindow.Seconds() / float64(shares))
	return min(max(int(each)*shares, st.Min), st.Max)
}

// String is st as the dashboard and the audit log show it: "2", or
// "1-20".
func (st Standby) String() string {
	if st.Min == st.Max {
		return fmt.Sprint(st.Max)
	}
	return fmt.Sprintf("%d-%d", st.Min, st.Max)
}

// MarshalJSON writes a fixed standby as a plain number, any other (one
// that follows demand, or a max below its min for the portal to refuse)
// as {"min", "max"}.
func (st Standby) MarshalJSON() ([]byte, error) {
	if st.Min == st.Max {
		return json.Marshal(st.Max)
	}
	type plain Standby
	return json.Marshal(plain(st))
}

// UnmarshalJSON reads a plain number or {"min", "max"} (max defaults to
// min when left out).
func (st *Standby) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf(`standby is a whole number of members (e.g. 2) or {"min": 1, "max": 20}: %w`, err)
		}
		*st = Fixed(n)
		return nil
	}
	var o struct {
		Min *int `json:"min"`
		Max *int `json:"max"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf(`standby is a whole number of members (e.g. 2) or {"min": 1, "max": 20}: %w`, err)
	}
	if o.Min == nil {
		return fmt.Errorf(`standby {"min": 1, "max": 20} needs its min (0 for none when demand is low)`)
	}
	st.Min, st.Max = *o.Min, *o.Min
	if o.Max != nil {
		st.Max = *o.Max
	}
	return nil
}

// validStandby refuses a standby out of range, or whose max is below its
// min, with what to write.
func validStandby(st Standby) error {
	const hint = `Write a number of members (0 for none), or {"min": 1, "max": 20} to follow demand; at most %d, and more than the pool's size keeps every free member on.`
	if st.Min < 0 || st.Max > MaxPoolSize {
		return Errorf(EInvalid, fmt.Sprintf(hint, MaxPoolSize), "Standby %s is out of range.", st)
	}
	if st.Max < st.Min {
		return Errorf(EInvalid, fmt.Sprintf(`Write the smaller number as min and the larger as max, e.g. {"min": %d, "max": %d}.`, st.Max, st.Min),
			"Standby max %d is below its min %d.", st.Max, st.Min)
	}
	return nil
}
