package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Sound: /ws/audio carries a desktop's sound to the console page as Opus
// packets, encoded inside the desktop's sandbox (see local's Desktop.Audio);
// the page decodes them with WebCodecs. Sound takes the console's watching
// decision: the holder and the people they invited listen; an admin beside
// the holder listens only as the pool's watch policy lets them watch (not
// at all under "off", once the holder has allowed their console under
// "consent"), shows in the holder's notice as listening, and is audited.
// The target is the desktop's own sound server.

// Audio reaches desktops' sound (the local backend's session desktops).
// Errors a user can act on are *vdi.Error.
type Audio interface {
	// HasAudio reports whether ref has sound to listen to now.
	HasAudio(ctx context.Context, ref vdi.Ref) bool
	// DialAudio returns ref's sound as an Ogg Opus stream.
	DialAudio(ctx context.Context, ref vdi.Ref) (io.ReadCloser, error)
}

// audioProps returns the console page's speaker button for d, or nil where
// there is no sound to play (a backend or desktop without it, or a pool
// whose policy forbids it).
func (h *audioRoutes) audioProps(r *http.Request, d vdi.Desktop) *views.AudioProps {
	if h.audio == nil || !d.Console.Audio || !h.audio.HasAudio(r.Context(), d.Ref()) {
		return nil
	}
	return &views.AudioProps{URL: "/ws/audio/" + d.Namespace + "/" + d.Name, Recorded: d.Recorded}
}

// handleAudioSocket serves GET /ws/audio/{ns}/{member}: the desktop's
// sound. The holder, their invitees and admins may listen (as they may
// open its console), where the pool's policy allows sound; everything is
// checked before the upgrade. console.Sessions.Listen keeps what ends it
// (a release or reclaim, an invitation's end) and lists the listener.
func (h *audioRoutes) handleAudioSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	d, share, err := h.listener(r.Context(), id, ref)
	if err != nil {
		return err
	}
	if !d.Console.Audio {
		return vdi.Errorf(vdi.EForbidden, "Ask an admin if the pool should allow sound.", "The pool of %s does not allow sound.", ref)
	}
	if h.audio == nil {
		return vdi.Errorf(vdi.EInvalid, "Use a session desktop of the portal's own machine for sound.", "Not supported: this portal's desktops have no sound.")
	}
	if !h.checkOrigin(r) {
		return vdi.Errorf(vdi.EForbidden, "Open the console from the portal's own pages.", "Audio websockets only accept the portal's own origin, not %q.", r.Header.Get("Origin"))
	}
	release, err := h.console.sessions.Listener(ref)
	if err != nil { // console.ErrListenersFull: each listener runs an encoder in the desktop
		return &limitError{After: 5 * time.Second, Msg: "This desktop's sound is already playing in several tabs.",
			Hint: "Mute it in a tab you no longer use, then turn sound on here."}
	}
	defer release()
	src, err := h.audio.DialAudio(r.Context(), ref)
	if err != nil {
		return err
	}
	defer src.Close()
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	defer ws.Close()
	ses := console.Session{ID: console.NewID(), User: id, Ref: ref, Protocol: vdi.ProtocolAudio, Holder: d.Holder, Share: share}
	if d.Holder != id.Login {
		// The holder's notice says who listens, as it says who watches.
		ses.Watcher = &api.Viewer{User: id.Login, Role: roleListen, Protocol: vdi.ProtocolAudio, Since: time.Now()}
		if share == nil {
			h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "listen", Namespace: ref.Namespace, Target: ref.Name,
				Detail: "held by " + d.Holder + "; watch policy " + string(d.Console.Watch)})
		}
	}
	h.console.sessions.Listen(r.Context(), ses, func(ctx context.Context) {
		log := h.log.With("desktop", ref, "user", id.Login)
		log.Info("audio opened")
		dropped, err := relay.PipeAudio(ctx, ws, src, relay.AudioHello{Codec: "opus", SampleRate: 48000, Channels: 2, FrameMs: 20})
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			log.Warn("audio ended", "err", err, "dropped", dropped)
		default:
			log.Info("audio closed", "dropped", dropped)
		}
	})
	return nil
}

// roleListen is the viewers list's role of someone who listens to a
// desktop's sound beside its holder.
const roleListen = "listen"

// listener returns ref for a listener of id's: its holder's, an invited
// user's (with the invitation), or an admin's whom the pool's watch
// policy lets watch it now; the refusal otherwise says why.
func (h *audioRoutes) listener(ctx context.Context, id vdi.Identity, ref vdi.Ref) (d vdi.Desktop, share *vdi.Share, err error) {
	d, err = h.desktops.Desktop(ctx, id, ref) // holder or admin
	if vdi.ErrorCode(err) == vdi.EForbidden {
		d, sh, err := h.desktops.SharedDesktop(ctx, id, ref)
		if err != nil {
			return vdi.Desktop{}, nil, err
		}
		return d, &sh, nil
	}
	if err != nil || d.Holder == "" || d.Holder == id.Login {
		return d, nil, err
	}
	switch d.Console.Watch {
	case vdi.WatchOff:
		return vdi.Desktop{}, nil, vdi.Errorf(vdi.EForbidden, "Ask the holder to share their screen, or change the pool's watch policy.",
			"The pool's policy keeps watchers off %s: only its holder and people they invite hear it.", ref)
	case vdi.WatchConsent:
		if !h.console.watchingAnywhere(ctx, ref, id.Login) {
			return vdi.Desktop{}, nil, vdi.Errorf(vdi.EForbidden, "Open its console first: sound follows once "+d.Holder+" allows the watch.",
				"The pool's policy asks %s before anyone watches or listens to %s.", d.Holder, ref)
		}
	}
	return d, nil, nil
}
