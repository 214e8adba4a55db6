package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handleDesktopsList serves GET /api/vdi/desktops (admins: ?all=1).
func (h *userDesktops) handleDesktopsList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	all := r.URL.Query().Get("all") == "1"
	if all && !id.Admin {
		return vdi.Errorf(vdi.EForbidden, "Leave out all=1 to list your own desktops.", "Only admins may list every desktop.")
	}
	ds, err := h.desktops.Desktops(r.Context(), id, all)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []vdi.Desktop{}
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

// handleDesktopGet serves GET /api/vdi/desktops/{ns}/{member}.
func (h *userDesktops) handleDesktopGet(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// handleDesktopStart serves POST /api/vdi/desktops/{ns}/{member}/start:
// it answers once the desktop was asked to start (a VM may still boot:
// "starting").
func (h *userDesktops) handleDesktopStart(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	defer h.console.dial.Forget(ref(r))
	if err := h.desktops.Start(r.Context(), id, ref(r)); err != nil {
		return err
	}
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	if d.Power == vdi.PowerStopped {
		d.Power = vdi.PowerStarting // asked: its platform may not show it yet
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// handleDesktopStartFresh serves POST
// /api/vdi/desktops/{ns}/{member}/start-fresh: an ephemeral desktop that
// stopped comes back fresh (vdi.Service.StartFresh).
func (h *userDesktops) handleDesktopStartFresh(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	defer h.console.dial.Forget(ref(r))
	if err := h.desktops.StartFresh(r.Context(), id, ref(r)); err != nil {
		return err
	}
	return h.handleDesktopGet(w, r, id)
}

// handleDesktopStop serves POST /api/vdi/desktops/{ns}/{member}/stop.
func (h *userDesktops) handleDesktopStop(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	defer h.console.dial.Forget(ref(r))
	if err := h.desktops.Stop(r.Context(), id, ref(r)); err != nil {
		return err
	}
	return h.handleDesktopGet(w, r, id)
}

// handleDesktopRelease serves POST /api/vdi/desktops/{ns}/{member}/release.
func (h *userDesktops) handleDesktopRelease(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.Release
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	if err := h.desktops.Release(r.Context(), id, ref(r), req.Reason); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"released": ref(r).String()})
	return nil
}

// decodeOptionalJSON reads a small JSON body into v; an empty body is fine.
func decodeOptionalJSON(r *http.Request, v any) error {
	err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	return vdi.Errorf(vdi.EInvalid, `Send a JSON object such as {"reason": "..."}, or no body.`, "The request body is not valid JSON: %v.", err)
}
