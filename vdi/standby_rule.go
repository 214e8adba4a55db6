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

// Demand-following standby: the claim rate is read from the pool's
// Leases (ClaimRate: every replica's claims, from the Leases themselves,
// so the leader that keeps standby sees them all), and the start time is
// the mean of the pool's last standby starts on this replica
// (DefaultStartTime before one finished).
const (
	StandbyWindow    = 10 * time.Minute
	DefaultStartTime = time.Minute
)

// StandbyMiss is the share of claims a demand-following standby may leave
// without a warm member: it keeps enough that the claims arriving at a
// share while its members start outnumber its warm ones at most this
// often (see Want).
const StandbyMiss = 0.01

// Follows reports whether st follows demand (Min < Max).
func (st Standby) Follows() bool { return st.Min < st.Max }

// IsZero reports whether st keeps no standby at all.
func (st Standby) IsZero() bool { return st.Max <= 0 }

// Want returns how many members st keeps warm given rate, the pool's
// claims a second (ClaimRate), start, how long a member takes to start,
// and shares, how many replicas' shares of the members the claims arrive
// at (claim_share.go; 1 when they share none). Each claim sets a start
// going, so while it runs the warm members a share has left are its
// standby less the claims that came meanwhile, a Poisson count with mean
// rate ÷ shares × start: each share keeps the fewest that count exceeds
// no more than StandbyMiss of the time (covering), for every share,
// clamped to Min..Max. The mean alone, rounded up, left one claim in
// eight at a morning's share without a warm member of its own, racing
// another share's claims for theirs. A fixed standby is its number.
func (st Standby) Want(rate float64, start time.Duration, shares int) int {
	if !st.Follows() {
		return st.Max
	}
	shares = max(shares, 1)
	each := covering(rate * start.Seconds() / float64(shares))
	return min(max(each*shares, st.Min), st.Max)
}

// covering returns the fewest warm members k such that a Poisson count of
// mean mu (the claims that arrive while a member starts) reaches k no
// more than StandbyMiss of the time: 0 for no claims, 1 while they are
// rare, about mu + 2.3√mu + 1 for many.
func covering(mu float64) int {
	if mu <= 0 {
		return 0
	}
	term := math.Exp(-mu) // P(N = k), from k = 0
	below := term         // P(N ≤ k)
	k := 0
	for 1-below > StandbyMiss && k < MaxPoolSize {
		k++
		term *= mu / float64(k)
		below += term
	}
	return k + 1
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
