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
	cancel context.CancelCauseFunc
}

// Take makes the console whose context cancel ends the viewer of ref,
// ending the previous one with ErrTakenOver, and returns a func to call
// when the console closes. Participants who share the console (#33) are
// to join the one viewer's upstream rather than Take it.
func (v *Takeover) Take(ref vdi.Ref, cancel context.CancelCauseFunc) (release func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.by == nil {
		v.by = map[vdi.Ref]viewer{}
	}
	if old, ok := v.by[ref]; ok {
		old.cancel(ErrTakenOver)
	}
	v.seq++
	me := viewer{id: v.seq, cancel: cancel}
	v.by[ref] = me
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if cur, ok := v.by[ref]; ok && cur.id == me.id {
			delete(v.by, ref)
		}
	}
}
