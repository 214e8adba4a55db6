package handlers

import (
	"context"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// recordingNotice is what /connect tells the user of recorded desktop d.
func recordingNotice(d vdi.Desktop) string {
	who := "admins"
	if d.RecordOwn {
		who = "you (in My sessions) and admins"
	}
	return "This session is recorded; " + who + " can watch it back. RDP is not offered because the portal cannot record it."
}

// startRecording starts recording session sid of id on d's console p when
// d's pool records its sessions, and returns nil otherwise. Without a
// recording store a recorded desktop's console is refused: nothing escapes
// the recording.
func (h *Handler) startRecording(ctx context.Context, sid string, id vdi.Identity, d vdi.Desktop, p vdi.Protocol) (*recording.Session, error) {
	if !d.Recorded {
		return nil, nil
	}
	if h.recordings == nil {
		return nil, vdi.Errorf(vdi.EUnavailable, "Ask an admin to set up recordings.", "Desktop %s/%s is recorded, and this portal keeps no recordings.", d.Namespace, d.Name)
	}
	rec, err := h.recordings.Start(ctx, sid, id.Login, d.Ref(), p, d.RecordInput)
	if err != nil {
		return nil, err
	}
	h.log.Info("recording console", "recording", sid, "desktop", d.Ref(), "user", id.Login, "protocol", p, "input", d.RecordInput)
	return rec, nil
}

// poolRecorded reports whether pool ns/name records its sessions (and
// keystrokes, and whether its users may play their own back), for the
// notice shown before anything is claimed.
func (h *kioskPages) poolRecorded(r *http.Request, id vdi.Identity, ns, name string) (record, input, own bool) {
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return false, false, false
	}
	for _, p := range pools {
		if p.Namespace == ns && p.Name == name {
			rec := p.Policy.Record
			return rec, rec && p.Policy.RecordInput, rec && p.Policy.OwnRecordings
		}
	}
	return false, false, false
}
