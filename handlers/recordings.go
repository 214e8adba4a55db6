package handlers

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// recordingJSON is a recording as GET /api/vdi/recordings lists it.
type recordingJSON = api.Recording

// recordingsOf returns the recordings store, or an error when the portal
// keeps none.
func (h *recordingRoutes) recordingsOf() (Recordings, error) {
	if h.recordings == nil {
		return nil, vdi.Errorf(vdi.ENotFound, "Recorded pools need a portal that keeps recordings.", "This portal keeps no recordings.")
	}
	return h.recordings, nil
}

// parseRecordings reads ?desktop=ns/member&user=&since=&until= (times as
// RFC 3339 or the form's 2006-01-02T15:04).
func parseRecordings(r *http.Request) (vdi.RecordingFilter, error) {
	q := r.URL.Query()
	f := vdi.RecordingFilter{User: strings.TrimSpace(q.Get("user"))}
	if d := strings.TrimSpace(q.Get("desktop")); d != "" {
		ns, member, ok := strings.Cut(d, "/")
		if !ok || ns == "" || member == "" {
			return f, vdi.Errorf(vdi.EInvalid, "Name the desktop as namespace/member, e.g. local/demo-1.", "%q is not a desktop.", d)
		}
		f.Namespace, f.Member = ns, member
	}
	for _, b := range []struct {
		name string
		out  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		in := q.Get(b.name)
		if in == "" {
			continue
		}
		t, err := time.ParseInLocation(formTime, in, time.Local)
		if err != nil {
			t, err = time.Parse(time.RFC3339, in)
		}
		if err != nil {
			return f, vdi.Errorf(vdi.EInvalid, "Write times as RFC 3339 or 2006-01-02T15:04 (the portal's zone).", "%q is not a time for %s.", in, b.name)
		}
		*b.out = t
	}
	return f, nil
}

// handleRecordingsJSON serves GET /api/vdi/recordings (admins).
func (h *recordingRoutes) handleRecordingsJSON(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	recs, err := h.recordingsOf()
	if err != nil {
		return err
	}
	f, err := parseRecordings(r)
	if err != nil {
		return err
	}
	list, err := recs.List(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]recordingJSON, 0, len(list))
	for _, rec := range list {
		j := recordingJSON{ID: rec.ID, Session: rec.ID, Desktop: rec.Namespace + "/" + rec.Member, User: rec.Login,
			Protocol: rec.Protocol, Format: rec.Format, Start: rec.StartedAt, Bytes: rec.Bytes}
		if !rec.EndedAt.IsZero() {
			end := rec.EndedAt
			j.End = &end
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// playable returns the recording named by the request's {id} if id may
// play it back: admins any, a user their own where the pool allows
// (vdi.Service.MayPlayRecording). An unknown id and another user's
// recording get the same refusal, so ids cannot be probed.
func (h *recordingRoutes) playable(r *http.Request, id vdi.Identity) (Recordings, vdi.Recording, error) {
	recs, err := h.recordingsOf()
	if err != nil {
		return nil, vdi.Recording{}, err
	}
	rec, err := recs.Get(r.Context(), r.PathValue("id"))
	if id.Admin {
		return recs, rec, err
	}
	if err == nil {
		err = h.desktops.MayPlayRecording(r.Context(), id, rec.Login, vdi.Ref{Namespace: rec.Namespace, Name: rec.Member})
	}
	if err != nil {
		return nil, vdi.Recording{}, vdi.ErrRecordingRefused()
	}
	return recs, rec, nil
}

// handleRecordingFile serves GET /api/vdi/recordings/{id} (admins, and the
// user whose session it was where the pool lets them): the file,
// application/x-asciicast for terminals and serial consoles. Every download
// is in the audit log; ?for=playback marks the playback page's.
func (h *recordingRoutes) handleRecordingFile(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	recs, _, err := h.playable(r, id)
	if err != nil {
		return err
	}
	detail := ""
	if r.URL.Query().Get("for") == "playback" {
		detail = "for playback"
	}
	rec, f, err := recs.Open(r.Context(), id, r.PathValue("id"), recording.ActionDownload, detail)
	if err != nil {
		return err
	}
	defer f.Close()
	ctype, ext := "application/x-asciicast", ".cast"
	if rec.Format == relay.FormatRFB {
		ctype, ext = "application/x-corral-rfb", ".rfb"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="`+rec.ID+ext+`"`)
	if _, err := io.Copy(w, f); err != nil {
		h.log.Debug("recording download ended early", "recording", rec.ID, "err", err)
	}
	return nil
}

// handleRecordingsPage serves GET /admin/recordings: the recordings, with
// filters.
func (h *recordingRoutes) handleRecordingsPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	recs, err := h.recordingsOf()
	if err != nil {
		return err
	}
	f, err := parseRecordings(r)
	if err != nil {
		return err
	}
	f.Limit = 500
	list, err := recs.List(r.Context(), f)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	props := views.RecordingsProps{Page: h.pageProps("Recordings", id), Desktop: q.Get("desktop"), User: q.Get("user"),
		Since: q.Get("since"), Until: q.Get("until"), Recordings: recordingRows(list)}
	props.Used, props.Max = recs.Used()
	props.UserShare = recs.UserShare()
	props.Deleted = q.Get("deleted")
	h.render(w, r, http.StatusOK, views.Recordings(props))
	return nil
}

// handleRecordingPage serves GET /admin/recordings/{id} (admins) and GET
// /history/recordings/{id} (the user whose session it was, where the pool
// lets them): the playback page, audit-logged as a playback.
func (h *recordingRoutes) handleRecordingPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	back := "/history"
	if strings.HasPrefix(r.URL.Path, "/admin/") { // behind adminOnly
		back = "/admin/recordings"
	}
	recs, rec, err := h.playable(r, id)
	if err != nil {
		return err
	}
	if err := recs.Watched(r.Context(), id, rec, recording.ActionPlay, ""); err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, views.Playback(views.PlaybackProps{
		Page: h.pageProps("Recording", id), Recording: recordingRow(rec), FileURL: "/api/vdi/recordings/" + url.PathEscape(rec.ID), Back: back,
	}))
	return nil
}
