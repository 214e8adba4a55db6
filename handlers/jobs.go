package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// jobURL is where a pool's job is followed.
func jobURL(ns, pool string) string { return "/api/vdi/pools/" + ns + "/" + pool + "/job" }

// writeJob answers 202 Accepted with a job left running, and where to
// follow it.
func writeJob(w http.ResponseWriter, job *vdi.Job) error {
	w.Header().Set("Location", jobURL(job.Namespace, job.Pool))
	writeJSON(w, http.StatusAccepted, job)
	return nil
}

// handlePoolJob serves GET /api/vdi/pools/{ns}/{pool}/job (admins): the
// pool's last job, running or ended.
func (h *poolAdmin) handlePoolJob(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	job, err := h.admin.Job(r.Context(), id, r.PathValue("ns"), r.PathValue("pool"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

// handleJobsList serves GET /api/vdi/jobs (admins): every pool's last job.
func (h *poolAdmin) handleJobsList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	jobs, err := h.admin.Jobs(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobs)
	return nil
}

// handlePoolJobCancel serves POST /api/vdi/pools/{ns}/{pool}/job/cancel
// (admins): the pool's running job stops (vdi.Service.CancelJob).
func (h *poolAdmin) handlePoolJobCancel(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	job, err := h.admin.CancelJob(r.Context(), id, r.PathValue("ns"), r.PathValue("pool"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}
