package handlers

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Files moves files in and out of desktops (the local backend's session
// desktops): uploads into the member's ~/Uploads, downloads from its
// ~/Downloads. Errors a user can act on are *vdi.Error.
type Files interface {
	// HasFiles reports whether ref is a desktop whose files can move.
	HasFiles(ctx context.Context, ref vdi.Ref) bool
	Upload(ctx context.Context, ref vdi.Ref, name string, body io.Reader, max, quota int64) (vdi.FileInfo, error)
	Downloads(ctx context.Context, ref vdi.Ref) ([]vdi.FileInfo, error)
	Download(ctx context.Context, ref vdi.Ref, name string) (*os.File, vdi.FileInfo, error)
}

// FilesConfig configures the Files panel.
type FilesConfig struct {
	// Files reaches desktops' homes; nil: no backend moves files.
	Files Files
	// MaxFile caps one upload, Quota all of a desktop's ~/Uploads
	// (zero: vdi.DefaultUploadMax, vdi.DefaultUploadQuota).
	MaxFile, Quota int64
}

// fileDesktop returns the desktop whose files id may move in direction
// (upload or download): only its holder, and only where the pool's policy
// and the backend allow it.
func (h *fileRoutes) fileDesktop(r *http.Request, id vdi.Identity, upload bool) (vdi.Desktop, error) {
	scope := vdi.ScopeSee // a token that only looks may take files out, one that acts bring them in
	if upload {
		scope = vdi.ScopeAct
	}
	if err := id.May(scope); err != nil {
		return vdi.Desktop{}, err
	}
	d, err := h.desktops.Desktop(r.Context(), id, ref(r)) // holder or admin only
	if err != nil {
		return d, err
	}
	if d.Holder != id.Login {
		return d, vdi.Errorf(vdi.EForbidden, "Only the desktop's holder moves files in and out of it.",
			"You do not hold %s, so you cannot move its files.", d.Ref())
	}
	if h.files.Files == nil {
		return d, vdi.Errorf(vdi.EInvalid, "Use a session desktop of the portal's own machine, or move files over the desktop's network.",
			"Not supported: this portal's desktops have no Files panel.")
	}
	switch {
	case upload && !d.Console.Upload:
		return d, vdi.Errorf(vdi.EForbidden, "Ask an admin if you need to bring files in.", "The pool of %s does not allow uploads.", d.Ref())
	case !upload && !d.Console.Download:
		return d, vdi.Errorf(vdi.EForbidden, "Ask an admin if you need to take files out.", "The pool of %s does not allow downloads.", d.Ref())
	}
	return d, nil
}

// filesProps returns the console page's Files panel for d, or nil where
// it would do nothing: not the holder, a backend or desktop without files,
// or a pool that allows neither way.
func (h *fileRoutes) filesProps(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.FilesProps {
	if h.files.Files == nil || d.Holder != id.Login || !(d.Console.Upload || d.Console.Download) || !h.files.Files.HasFiles(r.Context(), d.Ref()) {
		return nil
	}
	return &views.FilesProps{URL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/files", Upload: d.Console.Upload, Download: d.Console.Download}
}

// handleFilesList serves GET /api/vdi/desktops/{ns}/{member}/files: the
// files of the desktop's ~/Downloads.
func (h *fileRoutes) handleFilesList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.fileDesktop(r, id, false)
	if err != nil {
		return err
	}
	files, err := h.files.Files.Downloads(r.Context(), d.Ref())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, files)
	return nil
}

// handleFileDownload serves GET /api/vdi/desktops/{ns}/{member}/files/{name}:
// one file of the desktop's ~/Downloads, always as an attachment (never
// rendered on the portal's origin).
func (h *fileRoutes) handleFileDownload(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.fileDesktop(r, id, false)
	if err != nil {
		return err
	}
	f, info, err := h.files.Files.Download(r.Context(), d.Ref(), r.PathValue("name"))
	if err != nil {
		return err
	}
	defer f.Close()
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "file-download", Namespace: d.Namespace, Target: d.Name,
		Detail: fmt.Sprintf("%q, %d bytes, from ~/Downloads", info.Name, info.Size)})
	w.Header().Set("Content-Type", "application/octet-stream")
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": info.Name})
	if disposition == "" { // a name the header cannot carry: the browser picks one
		disposition = "attachment"
	}
	w.Header().Set("Content-Disposition", disposition)
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", info.Modified, f)
	return nil
}

// handleFileUpload serves PUT /api/vdi/desktops/{ns}/{member}/files/{name}:
// the body becomes a file of the desktop's ~/Uploads; the answer names it
// as written (a taken name gets a number).
func (h *fileRoutes) handleFileUpload(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.fileDesktop(r, id, true)
	if err != nil {
		return err
	}
	maxFile, quota := h.files.MaxFile, h.files.Quota
	if maxFile <= 0 {
		maxFile = vdi.DefaultUploadMax
	}
	if quota <= 0 {
		quota = vdi.DefaultUploadQuota
	}
	if r.ContentLength > maxFile {
		return vdi.Errorf(vdi.ETooLarge, "Split the file, or ask an admin to raise CORRAL_VDI_UPLOAD_MAX.",
			"The file is larger than the %d MiB a file may have.", maxFile>>20)
	}
	info, err := h.files.Files.Upload(r.Context(), d.Ref(), r.PathValue("name"), r.Body, maxFile, quota)
	if err != nil {
		return err
	}
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "file-upload", Namespace: d.Namespace, Target: d.Name,
		Detail: fmt.Sprintf("%q, %d bytes, into ~/Uploads", info.Name, info.Size)})
	writeJSON(w, http.StatusCreated, info)
	return nil
}
