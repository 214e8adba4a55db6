package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// USB redirection: the holder's machine runs usbredirect (the usbredir
// "host" side, owning the device) against `corral-vdi-portal usb redir`,
// which bridges it to /ws/usbredir; the portal relays the bytes to the VM's
// "guest" side: KubeVirt's usbredir subresource of the VMI, or QEMU's
// usb-redir chardev on the local backend. The portal never parses them.

// USBRedirector connects to a VM's usbredir endpoint and names the path
// taken (direct, apiserver). DialUSB gets a member the caller has
// authorized; errors a user can act on are *vdi.Error (no
// clientPassthrough on the VM, a VM started before USB was possible).
type USBRedirector interface {
	DialUSB(ctx context.Context, ref vdi.Ref) (conn net.Conn, path string, err error)
}

// Auditor records security events in the audit log.
type Auditor interface {
	Record(ctx context.Context, e vdi.AuditEvent) error
}

// usbStreams allows one device stream at a time per desktop: a guest's
// usb-redir endpoint takes one client, and a second attach is more likely
// a mistake (or someone else) than intended.
type usbStreams struct {
	mu sync.Mutex
	m  map[vdi.Ref]string // desktop -> who streams
}

// take claims ref's stream for login, or fails with EConflict.
func (s *usbStreams) take(ref vdi.Ref, login string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[vdi.Ref]string{}
	}
	if _, busy := s.m[ref]; busy {
		return nil, vdi.Errorf(vdi.EConflict, "Detach the other device first (stop its `corral-vdi-portal usb redir`), then try again.",
			"A USB device is already attached to %s: one device stream at a time per desktop.", ref)
	}
	s.m[ref] = login
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.m, ref)
	}, nil
}

// handleUSBRedirSocket serves GET /ws/usbredir/{ns}/{member}: a usbredir
// stream from the holder's machine to their VM. Only the holder may (an
// admin attaching a device to someone's desktop would be an admin's own
// device in a user's session: refused); the desktop must be a running VM
// of a backend that can take USB. Everything is checked before the
// upgrade, so a refusal is a plain HTTP error; attach and detach are in
// the audit log.
func (h *usbRoutes) handleUSBRedirSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	since := usbSince(r)
	d, err := h.desktops.Desktop(r.Context(), id, ref) // holder or admin only
	if err != nil {
		return err
	}
	if d.Holder != id.Login {
		return vdi.Errorf(vdi.EForbidden, "Only the desktop's holder may attach USB devices; assign it to yourself to use it.",
			"You do not hold %s, so you cannot attach a USB device to it.", ref)
	}
	if !h.checkOrigin(r) {
		return vdi.Errorf(vdi.EForbidden, "Attach devices with `corral-vdi-portal usb redir` or from the portal's own pages.",
			"USB websockets only accept the portal's own origin, not %q.", r.Header.Get("Origin"))
	}
	if err := h.usbSupported(r.Context(), id, d); err != nil {
		return err
	}
	if d.Power != vdi.PowerRunning {
		return vdi.Errorf(vdi.EUnavailable, "Start it from the desktop page, then attach the device again.", "Desktop %s is %s.", ref, d.Power)
	}
	releaseStream, err := h.usbStreams.take(ref, id.Login)
	if err != nil {
		return err
	}
	defer releaseStream()
	release, err := h.consoles.acquire(id.Login)
	if err != nil {
		return err
	}
	defer release()
	conn, path, err := h.usb.DialUSB(r.Context(), ref)
	if err != nil {
		var ve *vdi.Error
		if errors.As(err, &ve) {
			return err
		}
		return &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: fmt.Sprintf("The USB endpoint of %s does not answer.", ref),
			Hint: "Restart the desktop (a VM started before USB redirection was set up has none), then attach again."}
	}
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		conn.Close() // the upgrader has already answered the client
		return nil
	}
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "usb-attach", Namespace: ref.Namespace, Target: ref.Name, Detail: "via " + path})
	h.console.sessions.Run(r.Context(), console.Session{ID: console.NewID(), User: id, Ref: ref, Protocol: vdi.ProtocolUSBRedir, Path: path}, func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
		opts.PingEvery = h.console.cfg.PingEvery
		// relay's default message cap (1 MiB) is far above what usbredir
		// clients send at once (`usb redir` writes at most 64 KiB).
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		go h.endOnSignOut(ctx, cancel, id.Login, since)
		st, err := relay.Pipe(ctx, ws, conn, opts)
		if context.Cause(ctx) == errUSBSignedOut {
			err = errUSBSignedOut
		}
		h.audit(context.WithoutCancel(ctx), vdi.AuditEvent{Actor: id.Login, Action: "usb-detach", Namespace: ref.Namespace, Target: ref.Name,
			Detail: fmt.Sprintf("%d bytes to the VM, %d from it", st.BytesIn, st.BytesOut)})
		return st, err
	})
	return nil
}

// usbSupported returns an actionable error unless d is a VM on a portal
// that can redirect USB.
func (h *usbRoutes) usbSupported(ctx context.Context, id vdi.Identity, d vdi.Desktop) error {
	if h.usb == nil {
		return vdi.Errorf(vdi.EInvalid, "Ask an admin: this portal's backend has no USB redirection.", "USB redirection is not available on this portal.")
	}
	pools, err := h.desktops.Pools(ctx, id)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if p.Namespace == d.Namespace && p.Name == d.Pool && p.Kind != vdi.KindVM {
			return vdi.Errorf(vdi.EInvalid, "Use a desktop of a vm pool for USB devices.",
				"Not supported: USB needs a KubeVirt or QEMU VM, and %s/%s is a %s desktop.", d.Namespace, d.Name, p.Kind)
		}
	}
	return nil
}

// audit records e, logging a failure: the stream goes on either way.
func (h *auditTrail) audit(ctx context.Context, e vdi.AuditEvent) {
	if h.auditor == nil {
		return
	}
	if err := h.auditor.Record(ctx, e); err != nil {
		h.log.Error("audit", "action", e.Action, "err", err)
	}
}
