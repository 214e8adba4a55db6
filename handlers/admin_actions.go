package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleDesktopAssign serves POST /api/vdi/desktops/{ns}/{member}/assign:
// an admin gives a free desktop to {user}.
func (h *adminPages) handleDesktopAssign(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.Assign
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	if auth.IsCLILogin(req.User) || !auth.ValidLogin(req.User) {
		return vdi.Errorf(vdi.EInvalid, `Send {"user": "<login>"}: letters, digits and . _ @ + - only, up to 100 characters, as users sign in.`,
			"%q is not a user name a person can sign in with.", req.User)
	}
	d, err := h.admin.Assign(r.Context(), id, ref(r), req.User)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// handleDesktopRecreate serves POST /api/vdi/desktops/{ns}/{member}/recreate:
// an admin makes a free desktop fresh from its pool's source.
func (h *adminPages) handleDesktopRecreate(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	defer h.console.dial.Forget(ref(r))
	job, _, err := h.admin.RecreateJob(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	if job != nil {
		return writeJob(w, job)
	}
	return h.desktopGet(w, r, id)
}

// handleShadowPage serves GET /admin/shadow/{ns}/{member}: an admin watches
// a desktop's screen over VNC without sending input.
func (h *adminPages) handleShadowPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, views.Shadow(views.ShadowProps{
		Page:       h.pageProps("Watching "+d.Name, id),
		Heading:    "Watching " + d.Namespace + "/" + d.Name,
		Badge:      "view only",
		Back:       "/admin",
		BackText:   "Back to the pools",
		ViewOnly:   true,
		ConnectURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/connect",
		ViewersURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/viewers",
		Holder:     d.Holder,
		Me:         id.Login,
		ControlURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/control",
	}))
	return nil
}

// thumbWidth is the thumbnails' width in pixels.
const thumbWidth = 320

// thumbs caches thumbnails so that several dashboards (or quick
// refreshes) cost one VNC snapshot per desktop per period.
type thumbs struct {
	mu    sync.Mutex
	cache map[vdi.Ref]thumb
}

type thumb struct {
	png []byte
	at  time.Time
}

// handleThumb serves GET /admin/thumbs/{ns}/{member} (admins): a PNG of a running
// desktop's screen, taken at most once per thumbEvery (see takeThumb).
func (h *adminPages) handleThumb(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	h.thumbs.mu.Lock()
	t, ok := h.thumbs.cache[ref]
	h.thumbs.mu.Unlock()
	if !ok || time.Since(t.at) >= thumbEvery {
		img, err := h.takeThumb(r.Context(), ref)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := snapshot.PNG(&buf, img); err != nil {
			return err
		}
		t = thumb{png: buf.Bytes(), at: time.Now()}
		h.thumbs.mu.Lock()
		if h.thumbs.cache == nil {
			h.thumbs.cache = map[vdi.Ref]thumb{}
		}
		for r, old := range h.thumbs.cache { // desktops no longer watched or gone
			if time.Since(old.at) > 10*thumbEvery {
				delete(h.thumbs.cache, r)
			}
		}
		h.thumbs.cache[ref] = t
		h.thumbs.mu.Unlock()
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "private, max-age="+strconv.Itoa(int(thumbEvery/time.Second)))
	w.Write(t.png)
	return nil
}
