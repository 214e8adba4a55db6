package vdi

import (
	"slices"
	"time"
)

// burstSample is how many of a pool's latest claims ClaimRate times to see
// a burst: enough that the rate it reads is within about a fifth of the
// true one, few enough that a morning's first seconds show it.
const burstSample = 20

// ClaimRate returns pool's claims a second at now, given held, its live
// Leases: the larger of the claims acquired within StandbyWindow over
// that window, and, once that many are in it, the burstSample latest over
// the time since the earliest of them. The window alone spreads a
// morning's burst over ten minutes (a thousand claims in one minute read
// as 1.7 a second, not 17); the latest claims read the burst within
// seconds of its start, and fall back as it ends, their time growing
// with no claim to add.
func ClaimRate(held map[string]*Lease, now time.Time) float64 {
	var ages []time.Duration
	for _, l := range held {
		if age := now.Sub(l.AcquireTime); age >= 0 && age < StandbyWindow {
			ages = append(ages, age)
		}
	}
	rate := float64(len(ages)) / StandbyWindow.Seconds()
	if len(ages) < burstSample {
		return rate
	}
	slices.Sort(ages)
	// The earliest of the latest burstSample is at most a clock tick
	// from now when they came at once: a millisecond, not zero.
	since := max(ages[burstSample-1], time.Millisecond)
	return max(rate, float64(burstSample-1)/since.Seconds())
}
