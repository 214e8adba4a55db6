package console

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestTakeover: a second console of a desktop ends the first with
// ErrTakenOver; the first one's release then leaves the second in place;
// other desktops are untouched.
func TestTakeover(t *testing.T) {
	var v Takeover
	ref, other := vdi.Ref{Namespace: "ns", Name: "vm-1"}, vdi.Ref{Namespace: "ns", Name: "vm-2"}
	first, cancel1 := context.WithCancelCause(context.Background())
	release1 := v.Take(ref, cancel1)
	elsewhere, cancelOther := context.WithCancelCause(context.Background())
	defer v.Take(other, cancelOther)()

	second, cancel2 := context.WithCancelCause(context.Background())
	release2 := v.Take(ref, cancel2)
	if cause := context.Cause(first); !errors.Is(cause, ErrTakenOver) {
		t.Fatalf("first console's cause = %v; want ErrTakenOver", cause)
	}
	release1() // the old tab closes after the hand-over
	third, cancel3 := context.WithCancelCause(context.Background())
	defer v.Take(ref, cancel3)()
	if cause := context.Cause(second); !errors.Is(cause, ErrTakenOver) {
		t.Errorf("second console's cause = %v; want ErrTakenOver (the first one's release must not drop it)", cause)
	}
	release2()
	if third.Err() != nil || elsewhere.Err() != nil {
		t.Errorf("third %v, other desktop %v; want both open", third.Err(), elsewhere.Err())
	}
}
