package static

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// Handler returns a handler for GET and HEAD requests to
// /static/<folder>.<hash>/<file>. Mount it at [Prefix] without stripping the
// prefix, e.g. mux.Handle("GET /static/", assets.Handler()).
//
// With the current hash the file is served as immutable for a year, with a
// strong ETag. With a stale, unknown or missing hash (an old page after a
// deploy, or a hand-typed /static/novnc/core/rfb.js) the handler redirects
// (302, not cached) to the current URL. Files that are not embedded,
// directories and paths that try to leave their folder get 404.
func (a *Assets) Handler() http.Handler {
	return http.HandlerFunc(a.serve)
}

func (a *Assets) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, hash, ok := a.parse(r.URL.Path)
	if !ok {
		h.Set("Cache-Control", "no-cache")
		http.NotFound(w, r)
		return
	}
	if hash != a.folders[folderOf(name)] {
		target := a.URL(name)
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		h.Set("Cache-Control", "no-cache")
		http.Redirect(w, r, target, http.StatusFound)
		return
	}
	f, err := a.fsys.Open(name)
	if err != nil {
		// Indexed at startup, so only a broken fs.FS gets here.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	content, ok := f.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(f)
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		content = bytes.NewReader(b)
	}
	h.Set("Content-Type", contentType(name))
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", a.files[name])
	// Embedded files have no modification time; the ETag does the
	// revalidation, so no Last-Modified is sent.
	http.ServeContent(w, r, name, time.Time{}, content)
}

// parse splits a request path /static/<folder>[.<hash>]/<file> into the
// embedded file name "<folder>/<file>" and the hash, which is empty when the
// URL has none. It reports false unless the file is embedded; fs.ValidPath
// rejects "..", "." and empty elements, so a path cannot leave its folder.
func (a *Assets) parse(urlPath string) (name, hash string, ok bool) {
	rest, ok := strings.CutPrefix(urlPath, Prefix)
	if !ok {
		return "", "", false
	}
	seg, file, ok := strings.Cut(rest, "/")
	if !ok || file == "" || !fs.ValidPath(file) {
		return "", "", false
	}
	folder, hash, _ := strings.Cut(seg, ".")
	name = folder + "/" + file
	if _, ok := a.files[name]; !ok {
		return "", "", false
	}
	return name, hash, true
}

// folderOf returns the top-level folder of an embedded file name.
func folderOf(name string) string {
	folder, _, _ := strings.Cut(name, "/")
	return folder
}
