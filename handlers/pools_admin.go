package handlers

import (
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// policyOf reads a pool policy as API clients write it.
func policyOf(p api.Policy) (vdi.Policy, error) {
	out := vdi.Policy{Clipboard: p.Clipboard, Record: p.Record, RecordInput: p.RecordInput, OwnRecordings: p.OwnRecordings, Watch: p.Watch, Network: p.Network}
	if p.FileTransfer != nil {
		out.FileTransfer = *p.FileTransfer
	}
	if p.Audio != nil {
		out.Audio = vdi.ToggleOf(*p.Audio)
	}
	for _, f := range []struct {
		name string
		in   string
		out  *time.Duration
	}{
		{"disconnectGrace", p.DisconnectGrace, &out.DisconnectGrace},
		{"maxSession", p.MaxSession, &out.MaxSession},
		{"idleTimeout", p.IdleTimeout, &out.IdleTimeout},
	} {
		if f.in == "" {
			continue
		}
		d, err := time.ParseDuration(f.in)
		if err != nil || d < 0 {
			return out, vdi.Errorf(vdi.EInvalid, `Write durations like "15m", "1h30m" or "8h".`, "Policy %s %q is not a duration.", f.name, f.in)
		}
		*f.out = d
	}
	return out, nil
}

// defaultNamespace is where pools go when a request names none: the
// embedded default's namespace, the only backend that creates pools.
const defaultNamespace = "local"

// handlePoolCreate serves POST /api/vdi/pools (admins).
func (h *poolAdmin) handlePoolCreate(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.PoolCreate
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	policy, err := policyOf(req.Policy)
	if err != nil {
		return err
	}
	if err := validAccessUsers(req.Access); err != nil {
		return err
	}
	if req.Namespace == "" {
		req.Namespace = defaultNamespace
	}
	p := vdi.Pool{Namespace: req.Namespace, Name: req.Name, Kind: req.Kind, Mode: req.Mode, Source: req.Source, Size: req.Size, Policy: policy,
		Access: req.Access, Limits: req.Limits, Standby: req.Standby, StandbySchedule: req.StandbySchedule, LicensesAcknowledged: req.LicensesAcknowledged}
	job, _, err := h.admin.CreatePoolJob(r.Context(), id, p)
	if err != nil {
		return err
	}
	if job != nil {
		return writeJob(w, job)
	}
	return h.writePool(w, r, p.Namespace, p.Name, http.StatusCreated)
}

// handlePoolUpdate serves PATCH /api/vdi/pools/{ns}/{pool} (admins): resize
// (claimed desktops are never removed) or replace the policy.
func (h *poolAdmin) handlePoolUpdate(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.PoolPatch
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	u := vdi.PoolUpdate{Size: req.Size, Access: req.Access, Limits: req.Limits, Standby: req.Standby, StandbySchedule: req.StandbySchedule}
	if req.Access != nil {
		if err := validAccessUsers(*req.Access); err != nil {
			return err
		}
	}
	if req.Policy != nil {
		p, err := policyOf(*req.Policy)
		if err != nil {
			return err
		}
		u.Policy = &p
	}
	if u.Size == nil && u.Policy == nil && u.Access == nil && u.Limits == nil && u.Standby == nil && u.StandbySchedule == nil {
		return vdi.Errorf(vdi.EInvalid, `Send {"size": 4}, {"policy": {"idleTimeout": "1h"}}, {"access": {"groups": ["finance"]}} or {"limits": {"desktopsPerUser": 1}}.`, "Nothing to change.")
	}
	ns, name := r.PathValue("ns"), r.PathValue("pool")
	job, _, err := h.admin.UpdatePoolJob(r.Context(), id, ns, name, u)
	if err != nil {
		return err
	}
	if job != nil {
		return writeJob(w, job)
	}
	return h.writePool(w, r, ns, name, http.StatusOK)
}

// validAccessUsers fails on an access user who could never sign in: the
// same rule as sign-in's.
func validAccessUsers(a vdi.Access) error {
	for _, u := range a.Users {
		if !auth.ValidLogin(u) {
			return vdi.Errorf(vdi.EInvalid, "Write users as they sign in, e.g. alice@example.com.", "Access user %q is not a valid login.", u)
		}
	}
	return nil
}

// handlePoolDelete serves DELETE /api/vdi/pools/{ns}/{pool} (admins).
func (h *poolAdmin) handlePoolDelete(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ns, name := r.PathValue("ns"), r.PathValue("pool")
	if err := h.admin.DeletePool(r.Context(), id, ns, name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": ns + "/" + name})
	return nil
}

// writePool answers with the pool's status as GET /api/vdi/pools lists it.
func (h *poolAdmin) writePool(w http.ResponseWriter, r *http.Request, ns, name string, code int) error {
	pools, err := h.desktops.Pools(r.Context(), vdi.Identity{Admin: true})
	if err != nil {
		return err
	}
	for _, p := range pools {
		if p.Namespace == ns && p.Name == name {
			writeJSON(w, code, p)
			return nil
		}
	}
	return vdi.Errorf(vdi.ENotFound, "List the pools with GET /api/vdi/pools.", "No pool %s/%s.", ns, name)
}
