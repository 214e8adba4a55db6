package console

import (
	"sync"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// links keeps the relay path (direct, peer, apiserver) of each desktop's
// newest console on this replica, for the console page's connection
// chip. The zero value is ready.
type links struct {
	mu sync.Mutex
	by map[vdi.Ref]string
}

// set notes path as ref's console path until the returned func is called.
func (l *links) set(ref vdi.Ref, path string) (unset func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[vdi.Ref]string{}
	}
	l.by[ref] = path
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.by[ref] == path {
			delete(l.by, ref)
		}
	}
}

func (l *links) get(ref vdi.Ref) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[ref]
}
