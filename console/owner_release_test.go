package console

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// refusingOwners refuses the first refusals deletes of its records, as an
// API server does while an admission webhook or policy says no.
type refusingOwners struct {
	LocalOwners
	refusals, tries atomic.Int32
}

func (o *refusingOwners) Release(ctx context.Context, key string, own Owner) error {
	o.tries.Add(1)
	if o.refusals.Add(-1) >= 0 {
		return errors.New("leases.coordination.k8s.io is forbidden: the test refuses deletes")
	}
	return o.LocalOwners.Release(ctx, key, own)
}

// TestReleaseOwner_TriesAgain: a record whose delete is refused is
// deleted by a later try; one refused every time stays after the last
// try (TestHA_Takeover reads the log lines).
func TestReleaseOwner_TriesAgain(t *testing.T) {
	old := releaseTries
	releaseTries = []time.Duration{0, time.Millisecond, time.Millisecond, time.Millisecond}
	defer func() { releaseTries = old }()
	for _, tt := range []struct {
		name     string
		refusals int32
		tries    int32
		gone     bool
	}{
		{"RefusedTwice", 2, 3, true},
		{"RefusedAlways", 100, int32(len(releaseTries)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			owners := &refusingOwners{}
			owners.refusals.Store(tt.refusals)
			o, err := owners.Take(context.Background(), "serial:ns/vm", Owner{})
			if err != nil {
				t.Fatal(err)
			}
			releaseOwner(owners, slog.New(slog.DiscardHandler), "serial:ns/vm", o)
			for end := time.Now().Add(10 * time.Second); owners.tries.Load() < tt.tries && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // a try too many would come now
			if n := owners.tries.Load(); n != tt.tries {
				t.Errorf("the record's delete was tried %d times; want %d", n, tt.tries)
			}
			if cur, _ := owners.Get(context.Background(), "serial:ns/vm"); (cur.Version == "") != tt.gone {
				t.Errorf("the record after its release: %+v; want gone %v", cur, tt.gone)
			}
		})
	}
}
