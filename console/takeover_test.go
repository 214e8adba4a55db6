package console

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestTakeover: a newer console of a desktop ends the first with
// ErrTakenOver; the first one's release then leaves the second in place;
// other desktops, and the desktop's console of another protocol (its
// serial beside its VNC), are untouched.
func TestTakeover(t *testing.T) {
	var v Takeover
	stamp := func(i int) string { return fmt.Sprintf("%020d.s", i) }
	ref, other := vdi.Ref{Namespace: "ns", Name: "vm-1"}, vdi.Ref{Namespace: "ns", Name: "vm-2"}
	first, cancel1 := context.WithCancelCause(context.Background())
	release1 := v.Take(ref, vdi.ProtocolVNC, stamp(1), cancel1)
	elsewhere, cancelOther := context.WithCancelCause(context.Background())
	defer v.Take(other, vdi.ProtocolVNC, stamp(0), cancelOther)()
	serial, cancelSerial := context.WithCancelCause(context.Background())
	defer v.Take(ref, vdi.ProtocolSerial, stamp(0), cancelSerial)()

	second, cancel2 := context.WithCancelCause(context.Background())
	release2 := v.Take(ref, vdi.ProtocolVNC, stamp(2), cancel2)
	if cause := context.Cause(first); !errors.Is(cause, ErrTakenOver) {
		t.Fatalf("first console's cause = %v; want ErrTakenOver", cause)
	}
	release1() // the old tab closes after the hand-over
	third, cancel3 := context.WithCancelCause(context.Background())
	defer v.Take(ref, vdi.ProtocolVNC, stamp(3), cancel3)()
	if cause := context.Cause(second); !errors.Is(cause, ErrTakenOver) {
		t.Errorf("second console's cause = %v; want ErrTakenOver (the first one's release must not drop it)", cause)
	}
	release2()
	if third.Err() != nil || elsewhere.Err() != nil || serial.Err() != nil {
		t.Errorf("third %v, other desktop %v, the desktop's serial console %v; want all open", third.Err(), elsewhere.Err(), context.Cause(serial))
	}
}

// TestTakeover_NewestInBothOrders: of two consoles recorded one after
// the other, the newer stays whichever takes first; the older ends taken
// over. One whose claim was not written (no stamp) takes over from the
// one it finds, and gives way to the next.
func TestTakeover_NewestInBothOrders(t *testing.T) {
	s7, s8 := "00000000000000000007.b", "00000000000000000008.a"
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	for _, tc := range []struct{ first, second, older string }{
		{s7, s8, s7},
		{s8, s7, s7},
		{s8, "", s8},
		{"", s8, ""},
	} {
		var v Takeover
		ctxs := map[string]context.Context{}
		for _, stamp := range []string{tc.first, tc.second} {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctxs[stamp] = ctx
			defer v.Take(ref, vdi.ProtocolVNC, stamp, cancel)()
		}
		newer := tc.first
		if newer == tc.older {
			newer = tc.second
		}
		if cause := context.Cause(ctxs[tc.older]); !errors.Is(cause, ErrTakenOver) || ctxs[newer].Err() != nil {
			t.Errorf("%q then %q: the older console (%q) %v, the newer %v; want the older taken over, the newer open", tc.first, tc.second, tc.older, cause, ctxs[newer].Err())
		}
	}
}
