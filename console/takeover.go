package console

import (
	"context"
	"errors"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ErrTakenOver ends a VNC or serial console that a newer one of the same desktop
// replaced; the old tab shows it as the close reason.
var ErrTakenOver = errors.New("taken over: this desktop was opened in another tab or window")

// Takeover keeps one viewer per desktop for consoles that allow only one
// (VNC: upstream KubeVirt lets a new viewer silently steal the old one, so
// the portal makes the hand-over visible instead). The zero value is ready.
type Takeover struct {
	mu  sync.Mutex
	seq uint64
	by  map[vdi.Ref]viewer
}

type viewer struct {
	id     uint64
	stamp  string
	cancel context.CancelCauseFunc
}

// Take makes the console stamped stamp (vdi.ConsoleStamp), whose context cancel
// ends it, the viewer of ref and returns a func to call when the console
// closes. Of two consoles the newer stays, whichever takes first: the
// older one ends with ErrTakenOver (at once, if it comes second).
// Participants who share the console (#33) are to join the one viewer's
// upstream rather than Take it.
func (v *Takeover) Take(ref vdi.Ref, stamp string, cancel context.CancelCauseFunc) (release func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.by == nil {
		v.by = map[vdi.Ref]viewer{}
	}
	if old, ok := v.by[ref]; ok {
		if vdi.NewerConsole(old.stamp, stamp) {
			cancel(ErrTakenOver) // a newer one came first
			return func() {}
		}
		old.cancel(ErrTakenOver)
	}
	v.seq++
	me := viewer{id: v.seq, stamp: stamp, cancel: cancel}
	v.by[ref] = me
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if cur, ok := v.by[ref]; ok && cur.id == me.id {
			delete(v.by, ref)
		}
	}
}
