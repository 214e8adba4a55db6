// Package testwait stretches the waits of tests that drive real parts
// (browsers, desktops, clusters) by CORRAL_TEST_WAIT_SCALE: a wait is how
// long a test gives something to happen before it calls it broken, never
// a goal for how fast it happens (speed is measured in benchmarks), so
// where tests share a machine's cores with each other (make test runs the
// e2e shards beside the other packages) they wait longer, and a test
// that fails still fails, later.
package testwait

import (
	"math"
	"os"
	"strconv"
	"time"
)

// EnvScale names the factor: a number of at least 1 (1 when unset or not
// such a number).
const EnvScale = "CORRAL_TEST_WAIT_SCALE"

// Scale returns the factor waits are stretched by.
func Scale() float64 {
	f, err := strconv.ParseFloat(os.Getenv(EnvScale), 64)
	if err != nil || !(f >= 1) || math.IsInf(f, 0) { // NaN and Inf too
		return 1
	}
	return f
}

// D returns the wait d, stretched.
func D(d time.Duration) time.Duration { return time.Duration(float64(d) * Scale()) }

// MS returns a wait of ms milliseconds (Playwright's unit), stretched.
func MS(ms float64) float64 { return ms * Scale() }
