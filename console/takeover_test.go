package console

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestTakeover: a newer console of a desktop ends the first with
// ErrTakenOver; the first one's release then leaves the second in place;
// other desktops, and the desktop's console of another protocol (its
// serial beside its VNC), are untouched.
func TestTakeover(t *testing.T) {
	var v Takeover
	at := time.Now()
	stamp := func(i int) string { return vdi.ConsoleStamp(at.Add(time.Duration(i)*time.Millisecond), "s") }
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

// TestTakeover_NewestInBothOrders: of two consoles opened at almost the
// same moment, the newer stays whichever takes first; the older ends
// taken over.
func TestTakeover_NewestInBothOrders(t *testing.T) {
	at := time.Now()
	older, newer := vdi.ConsoleStamp(at, "b"), vdi.ConsoleStamp(at.Add(time.Microsecond), "a")
	if tie := vdi.ConsoleStamp(at, "a"); !vdi.NewerConsole(older, tie) || !vdi.NewerConsole(newer, older) || vdi.NewerConsole(older, newer) {
		t.Fatalf("stamps out of order: %q, %q, %q", tie, older, newer)
	}
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	for _, order := range [][2]string{{older, newer}, {newer, older}} {
		var v Takeover
		ctxs := map[string]context.Context{}
		for _, stamp := range order {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctxs[stamp] = ctx
			defer v.Take(ref, vdi.ProtocolVNC, stamp, cancel)()
		}
		if cause := context.Cause(ctxs[older]); !errors.Is(cause, ErrTakenOver) || ctxs[newer].Err() != nil {
			t.Errorf("taken in the order %q: the older console %v, the newer %v; want the older taken over, the newer open", order, cause, ctxs[newer].Err())
		}
	}
}
