package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// maxTerminalMessage is the largest client message of a serial console or
// terminal: a paste. VNC keeps relay's default.
const maxTerminalMessage = 64 << 10

// handleVNCSocket serves GET /ws/vnc/{ns}/{member}: the VNC console
// websocket. The caller must hold the desktop (or be an admin); that and the
// desktop's stream are checked before the upgrade, so a refusal is a plain
// HTTP error. The target is the member's own, never the client's choice.
// One VNC viewer at a time: the holder's newer console closes this one.
func (h *Handler) handleVNCSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return h.serveConsole(w, r, id, vdi.ProtocolVNC)
}

// handleSerialSocket serves GET /ws/serial/{ns}/{member}: a VM's serial
// console for xterm.js. Resize messages are dropped: a serial line has no
// size. One at a time, like VNC.
func (h *Handler) handleSerialSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return h.refuseInBand(w, r, h.serveConsole(w, r, id, vdi.ProtocolSerial))
}

// handleTerminalSocket serves GET /ws/terminal/{ns}/{member}: a shell on a
// pty of a session desktop for xterm.js; resize messages reach the pty.
func (h *Handler) handleTerminalSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return h.refuseInBand(w, r, h.serveConsole(w, r, id, vdi.ProtocolTerminal))
}

// refuseInBand tells a terminal or serial console page why its websocket
// is refused (err, which serveConsole returned before upgrading), where
// it can read it: a browser cannot read a refused handshake's answer, and
// the page's preflight cannot foresee every refusal (the holder's older
// serial console that does not let go of the line, a record naming a
// replica that no longer shares the console). A page that offers
// relay.SubprotocolRefused gets the handshake with it and one text
// message, the API's error JSON with its status, then a close; any other
// client the HTTP refusal.
func (h *Handler) refuseInBand(w http.ResponseWriter, r *http.Request, err error) error {
	if err == nil || !websocket.IsWebSocketUpgrade(r) || !slices.Contains(websocket.Subprotocols(r), relay.SubprotocolRefused) {
		return err
	}
	code, msg, hint := h.errorText(r, err)
	up := relay.Upgrader(h.checkOrigin)
	up.Subprotocols = []string{relay.SubprotocolRefused}
	ws, uerr := up.Upgrade(w, r, nil)
	if uerr != nil {
		return nil // the upgrader has answered (a foreign Origin: 403)
	}
	b, _ := json.Marshal(struct {
		Status int `json:"status"`
		api.Error
	}{code, api.Error{Msg: msg, Hint: hint}})
	ws.SetWriteDeadline(time.Now().Add(time.Second))
	ws.WriteMessage(websocket.TextMessage, b)
	closeWS(ws, websocket.CloseNormalClosure, "refused")
	return nil
}

// serveConsole authorizes, connects by the first relay path that works,
// upgrades (checking Origin) and hands the session to console.Sessions,
// which keeps what ends it and who sees it. A request that is no upgrade
// is the page's preflight: authorized alike, it connects nothing.
func (h *Handler) serveConsole(w http.ResponseWriter, r *http.Request, id vdi.Identity, p vdi.Protocol) error {
	ref := ref(r)

	d, share, err := h.consoleDesktop(r.Context(), id, ref, p)
	if err != nil {
		return err
	}
	if err := offers(d, p); err != nil {
		return err
	}
	if !h.checkOrigin(r) { // the upgrader checks again; this is before any dial
		return vdi.Errorf(vdi.EForbidden, "Open the console from the portal's own pages.", "Console websockets only accept the portal's own origin, not %q.", r.Header.Get("Origin"))
	}
	release, err := h.consoles.acquire(id.Login)
	if err != nil {
		return err
	}
	defer release()
	// An admin or an invited user, alongside the holder.
	watching := share != nil || (d.Holder != "" && d.Holder != id.Login)
	screenNo, err := consoleScreen(r, p, d.CapsOf(p), d.Holder == id.Login && share == nil)
	if err != nil {
		return err
	}
	if watching && d.Console.Watch == vdi.WatchOff {
		return vdi.Errorf(vdi.EForbidden, "Ask the holder to share their screen another way, or change the pool's watch policy.",
			"The pool's policy keeps watchers off %s: only its holder opens its consoles.", ref)
	}
	// Watching is view-only unless an invitation gives control: an
	// admin beside the holder watches their screen, serial console or
	// terminal.
	viewOnly := watching && (share == nil || !share.Control)
	// An admin the holder gave control (Request control) types on the screen.
	granted := false
	if watching && share == nil && p == vdi.ProtocolVNC {
		if granted, err = h.controlGranted(r, id, d); err != nil {
			return err
		}
		viewOnly = viewOnly && !granted
	}
	if !websocket.IsWebSocketUpgrade(r) {
		return h.preflight(w, r, d, share, p, watching)
	}
	beside := false // an admin's serial console joined another admin's, view only
	connect := func(ctx context.Context) (net.Conn, string, error) {
		if p != vdi.ProtocolVNC {
			c, path, joined, err := h.byteConsole(ctx, id, d, share, p)
			if joined {
				beside, viewOnly = true, true
			}
			return c, path, err
		}
		// Everyone on the desktop's screen shares its one VNC connection
		// (rfb.Hub), held by one replica cluster-wide (console.Screens): a
		// KubeVirt VMI takes one client, and a slow viewer only falls
		// behind itself. Only the holder's and invitees' with control
		// input reaches the desktop. The one upstream may take any path.
		if screenNo > 0 && d.CapsOf(p).Heads > 1 {
			return h.joinHead(ctx, ref, screenNo, !viewOnly) // a VM's further head
		}
		return h.console.screens.Join(ctx, ref, !viewOnly, h.console.screenDial(ref))
	}
	// The holder's newest serial console ends their older one on every
	// replica before it dials: the line takes one client.
	sid := console.NewID()
	ses := console.Session{ID: sid, User: id, Ref: ref, Protocol: p, Holder: d.Holder, Share: share, Granted: granted, Screen: screenNo}
	ctx, leave := h.console.sessions.TakeOver(r.Context(), &ses)
	defer leave()
	// The holder's console asks them before an admin watches (an
	// invitation is the holder's own answer); the desktop is connected
	// only once they allow it, so nothing waits on a handshake meanwhile.
	consent := watching && share == nil && d.Console.Watch == vdi.WatchConsent && !granted
	var conn net.Conn
	var path string
	if !consent {
		if conn, path, err = connect(ctx); err != nil {
			if roleChanged(ctx) {
				// A holder's serial console came while an admin's own
				// dialed: his page opens again, beside it (HolderCame).
				if ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil); err == nil {
					closeWS(ws, websocket.CloseGoingAway, relay.CloseReason(ctx))
				}
				return nil
			}
			return err
		}
	}
	rec, err := h.startRecording(r.Context(), sid, id, d, p)
	if err != nil {
		closeConn(conn)
		return err
	}
	if rec != nil {
		defer func() {
			if err := rec.Close(r.Context()); err != nil {
				h.log.Error("finish recording", "recording", sid, "err", err)
			}
		}()
	}
	up := relay.Upgrader(h.checkOrigin)
	if beside {
		up.Subprotocols = []string{relay.SubprotocolViewOnly} // the page says it watches, if it asked
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		closeConn(conn) // the upgrader has already answered the client
		return nil
	}
	watcher := api.Viewer{User: id.Login, Role: "control", Protocol: p, Since: time.Now()}
	if viewOnly {
		watcher.Role = "watch" // the relay drops their input (below)
	}
	if consent {
		alive, stop := wsAlive(r.Context(), ws)
		allowed := h.console.sessions.Watchers().Await(alive, ref, watcher)
		stop()
		if !allowed {
			closeWS(ws, websocket.ClosePolicyViolation, d.Holder+" did not allow the watch")
			return nil
		}
		if conn, path, err = connect(ctx); err != nil {
			h.log.Warn("console not connected", "desktop", ref, "user", id.Login, "err", err)
			closeWS(ws, websocket.CloseTryAgainLater, "The desktop did not answer: reconnect, or ask its holder to.")
			return nil
		}
	}
	screen := conn // the hub's viewer before any filter: its video may go by WebRTC
	conn = h.clipboardFilter(conn, d, p, id.Login)
	ses.Path = path
	if watching {
		ses.Watcher = &watcher
	}
	h.console.sessions.Run(ctx, ses, func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
		opts.PingEvery = h.console.cfg.PingEvery
		if path == console.PathPeer { // another replica's went away, not the desktop
			opts.LinkGone = peerGone(p)
		}
		var video *relay.VideoRecorder // a recorded screen's video that goes by WebRTC
		if rec != nil {
			opts.Recorder = rec
			if p == vdi.ProtocolVNC {
				if v, err := relay.RecordVideo(ctx, rec, conn); err == nil {
					video, opts.Recorder = v, v
				}
			}
		}
		if p == vdi.ProtocolVNC {
			sig := h.newRTCSignal(ctx, ref, screen, rec != nil, video)
			defer sig.stop()
			opts.Text = sig.text
		}
		if viewOnly && p == vdi.ProtocolVNC {
			// Watching is view-only here, not just in noVNC: the viewer's
			// keys, pointer and clipboard never reach the holder's desktop.
			opts.Filter = new(relay.RFBViewOnly).Filter
		}
		if p == vdi.ProtocolSerial || p == vdi.ProtocolTerminal {
			opts.Control = relay.TerminalControl(conn)
			opts.MaxMessage = maxTerminalMessage
		}
		return relay.Pipe(ctx, ws, conn, opts)
	})
	return nil
}

// peerGone is what a console relayed from another replica says when that
// replica drops the link (killed, its node lost): the page reconnects, and
// another replica holds the screen or relays the console then.
func peerGone(p vdi.Protocol) string {
	if p == vdi.ProtocolVNC {
		return "the portal server holding this desktop's screen went away; another one takes it over"
	}
	return "the portal server relaying this console went away"
}

// byteConsole connects a terminal or serial console of d. The holder's
// opens the one the desktop's invitees and admins join (console.Streams,
// on any replica: a serial line takes one client, so its newest console
// replaces the older one); an invitee joins it, typing only with
// control; an admin beside the holder joins it view only, never opening
// a shell or serial client of their own beside the holder's. An admin's
// console of a desktop nobody holds is their own; their serial console
// gives way to the holder's once someone claims the desktop and opens
// one.
func (h *Handler) byteConsole(ctx context.Context, id vdi.Identity, d vdi.Desktop, share *vdi.Share, p vdi.Protocol) (_ net.Conn, path string, joined bool, _ error) {
	dial := func(ctx context.Context) (net.Conn, string, error) { return h.console.dial.Dial(ctx, d.Ref(), p) }
	var c net.Conn
	var err error
	switch {
	case share != nil || d.Holder != "" && d.Holder != id.Login:
		var ok bool
		if c, path, ok, err = h.console.shared.Join(ctx, d.Ref(), p, share != nil && share.Control); err != nil {
			return nil, "", false, err
		}
		if !ok {
			return nil, "", false, noneOpen(d, share, p)
		}
		return c, path, false, nil
	case d.Holder == id.Login:
		// The holder's: recorded, it holds the line (a serial console's).
		c, path, err = h.console.shared.Open(ctx, d.Ref(), p, dial, p == vdi.ProtocolSerial)
	case p == vdi.ProtocolSerial:
		// An admin's serial console of a desktop nobody holds: recorded
		// as the holder's would be, it holds the line until a holder's
		// comes (console.HolderCame); or, another admin's holding it, it
		// joins that one, view only.
		c, path, joined, err = h.console.shared.OpenOrWatch(ctx, d.Ref(), p, dial)
	default:
		c, path, err = dial(ctx)
		return c, path, false, err
	}
	var known *vdi.Error
	if err != nil && !errors.As(err, &known) { // taken over meanwhile, or the stream ended at once
		return nil, "", false, vdi.Errorf(vdi.EUnavailable, "Connect again.", "The %s console of %s closed as it opened.", p, d.Ref())
	}
	return c, path, joined, err
}

// roleChanged reports whether ctx, a console's, ended as the portal
// changed its role (console.HolderCame).
func roleChanged(ctx context.Context) bool {
	var ended console.ShareEnded
	return errors.As(context.Cause(ctx), &ended) && strings.HasPrefix(string(ended), console.RoleChangedPrefix)
}

// noneOpen is why a console beside the holder's (an invitee's, share;
// else an admin's) of d is refused: the holder has no console p open.
func noneOpen(d vdi.Desktop, share *vdi.Share, p vdi.Protocol) error {
	if share != nil {
		return vdi.Errorf(vdi.EConflict, "Ask "+d.Holder+" to open it, then open the link again.",
			"%s has no %s console of %s open to share.", d.Holder, p, d.Ref())
	}
	return vdi.Errorf(vdi.EConflict, "Watch its screen, or open this console again once "+d.Holder+" has: an admin beside the holder watches theirs, view only.",
		"%s has no %s console of %s open to watch.", d.Holder, p, d.Ref())
}

// preflight answers a console's request that is no websocket upgrade: a
// page asks it before it dials, because a browser cannot read why a
// websocket's handshake was refused. It was authorized as the websocket
// is, and says what the websocket would be refused for as far as can be
// told without connecting (a console beside the holder's that has none
// to join), else 204. It changes nothing: nothing is dialed, joined or
// recorded.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request, d vdi.Desktop, share *vdi.Share, p vdi.Protocol, watching bool) error {
	if watching && p != vdi.ProtocolVNC {
		ok, err := h.console.shared.Shared(r.Context(), d.Ref(), p)
		if err != nil {
			return &vdi.Error{Code: vdi.EUnavailable, Err: err, Hint: "Connect again in a moment.",
				Msg: "Whether " + d.Holder + " has the " + string(p) + " console of " + d.Ref().String() + " open cannot be read now."}
		}
		if !ok {
			return noneOpen(d, share, p)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// consoleDesktop returns ref for a console of id's: the holder's or an
// admin's, or, for a user the holder invited, the desktop and the
// invitation (its screen, terminal and serial consoles; not RDP).
func (h *Handler) consoleDesktop(ctx context.Context, id vdi.Identity, ref vdi.Ref, p vdi.Protocol) (vdi.Desktop, *vdi.Share, error) {
	d, err := h.desktops.Desktop(ctx, id, ref) // holder or admin
	if err == nil || vdi.ErrorCode(err) != vdi.EForbidden {
		return d, nil, err
	}
	d, sh, err := h.desktops.SharedDesktop(ctx, id, ref)
	if err != nil {
		return vdi.Desktop{}, nil, err
	}
	if p == vdi.ProtocolRDP {
		return vdi.Desktop{}, nil, vdi.Errorf(vdi.EForbidden, "Open the shared page's console.",
			"An invitation to %s opens its screen, terminal and serial console, not its %s console.", ref, p)
	}
	return d, &sh, nil
}

// offers returns an error a user can act on unless d, running, offers
// console p.
func offers(d vdi.Desktop, p vdi.Protocol) error {
	if d.Power != vdi.PowerRunning {
		return vdi.Errorf(vdi.EUnavailable, "Start it from the desktop page, then connect again.", "Desktop %s/%s is %s.", d.Namespace, d.Name, d.Power)
	}
	var names []string
	for _, o := range d.Protocols {
		if o == p {
			return nil
		}
		names = append(names, string(o))
	}
	return vdi.Errorf(vdi.EInvalid, "Use one of its consoles: "+strings.Join(names, ", ")+".", "Desktop %s/%s has no %s console.", d.Namespace, d.Name, p)
}

// closeConn closes c unless it is nil (a consent watch connects late).
func closeConn(c net.Conn) {
	if c != nil {
		c.Close()
	}
}

// closeWS ends ws with a close frame whose reason the console page shows.
func closeWS(ws *websocket.Conn, code int, reason string) {
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	// Read what the browser sent until it answers the close (or a second
	// passes), then close: closing with its pongs unread resets the
	// connection, and a browser that meets the reset before the close
	// frame says 1006 and loses the reason (an admin refused a watch read
	// "The connection was lost" and tried again).
	ws.SetReadDeadline(time.Now().Add(time.Second))
	for {
		if _, _, err := ws.NextReader(); err != nil {
			break
		}
	}
	ws.Close()
}

// consentPing is how often a console waiting for the holder's consent
// checks that its browser is still there.
const consentPing = 2 * time.Second

// wsAlive returns a context that ends with ctx, with stop, or once ws's
// peer is gone (a ping cannot be written): a hijacked request's own
// context does not end when its client leaves. It reads nothing from ws.
func wsAlive(ctx context.Context, ws *websocket.Conn) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		t := time.NewTicker(consentPing)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(consentPing)) != nil {
					return
				}
			}
		}
	}()
	return ctx, cancel
}
