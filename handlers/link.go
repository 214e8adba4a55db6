package handlers

import (
	"net/http"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// links keeps the relay path (direct, peer, apiserver) of each desktop's
// newest console, for the console page's connection chip. The zero value
// is ready.
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

// linkInfo answers GET …/link.
type linkInfo struct {
	// Path is how the portal reaches the desktop's console: direct, peer
	// or apiserver; empty while no console is open.
	Path string `json:"path"`
}

// handleDesktopLink serves GET /api/vdi/desktops/{ns}/{member}/link: the
// path of the desktop's open console. The console page times this small
// request for its round-trip figure.
func (h *userDesktops) handleDesktopLink(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	if _, err := h.desktops.Desktop(r.Context(), id, ref); err != nil { // holder or admin only
		return err
	}
	writeJSON(w, http.StatusOK, linkInfo{Path: h.console.links.get(ref)})
	return nil
}
