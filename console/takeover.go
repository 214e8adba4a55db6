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

// Takeover keeps one viewer per desktop and protocol for consoles that
// allow only one (VNC: upstream KubeVirt lets a new viewer silently steal
// the old one, so the portal makes the hand-over visible instead; serial:
// QEMU serves one client). A desktop's VNC and serial consoles are apart,
// as on the other replicas (the claim records each protocol's newest).
// The zero value is ready.
type Takeover struct {
	mu  sync.Mutex
	seq uint64
	by  map[viewed]viewer
}

// viewed is a desktop's console of one protocol.
type viewed struct {
	ref vdi.Ref
	p   vdi.Protocol
}

type viewer struct {
	id     uint64
	stamp  string
	cancel context.CancelCauseFunc
}

// Take makes the console stamped stamp (vdi.Service.TakeConsole), whose
// context cancel ends it, the viewer of ref's p console and returns a func
// to call when the console closes. Of two consoles the newer stays,
// whichever takes first: the older one ends with ErrTakenOver (at once,
// if it comes second). A console with no stamp (its claim not written)
// is newer than the one it finds here, older than any that comes after.
// Participants who share the console (#33) are to join the one viewer's
// upstream rather than Take it.
func (v *Takeover) Take(ref vdi.Ref, p vdi.Protocol, stamp string, cancel context.CancelCauseFunc) (release func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.by == nil {
		v.by = map[viewed]viewer{}
	}
	key := viewed{ref, p}
	if old, ok := v.by[key]; ok {
		if stamp != "" && vdi.NewerConsole(old.stamp, stamp) {
			cancel(ErrTakenOver) // a newer one came first
			return func() {}
		}
		old.cancel(ErrTakenOver)
	}
	v.seq++
	me := viewer{id: v.seq, stamp: stamp, cancel: cancel}
	v.by[key] = me
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if cur, ok := v.by[key]; ok && cur.id == me.id {
			delete(v.by, key)
		}
	}
}
