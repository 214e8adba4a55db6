package handlers

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// ClipImages reads and sets the picture on desktops' clipboards (the local
// backend's session desktops: their X CLIPBOARD in image/png). Errors a
// user can act on are *vdi.Error.
type ClipImages interface {
	// HasClipboardImages reports whether ref's clipboard carries pictures.
	HasClipboardImages(ctx context.Context, ref vdi.Ref) bool
	// ClipboardImage returns the PNG on ref's clipboard, at most max bytes.
	ClipboardImage(ctx context.Context, ref vdi.Ref, max int64) ([]byte, error)
	// SetClipboardImage puts a PNG on ref's clipboard.
	SetClipboardImage(ctx context.Context, ref vdi.Ref, pic []byte) error
}

// MaxClipImage bounds a clipboard picture either way, in bytes.
const MaxClipImage = 16 << 20

// clipImageTimeout bounds the desktop's part of one picture: its
// programs reading or taking it.
const clipImageTimeout = 20 * time.Second

// clipImageRoutes serves the clipboard panel's pictures (clipimage.go).
type clipImageRoutes struct {
	auditTrail
	desktops Desktops
	images   ClipImages
	// limits bounds each user's picture reads and writes: each runs
	// programs in the desktop.
	limits *userLimits
}

func newClipImageRoutes(trail auditTrail, desktops Desktops, images ClipImages) *clipImageRoutes {
	return &clipImageRoutes{auditTrail: trail, desktops: desktops, images: images,
		limits: newUserLimits(RateLimit{Every: time.Second, Burst: 10})}
}

// clipDesktop returns the desktop whose clipboard picture id may read
// (toDesktop false) or set: its holder's, or an invitee's whose
// invitation gives control (the only ones the desktop's clipboard text
// reaches), as the pool's clipboard policy allows that way, within id's
// rate limit.
func (h *clipImageRoutes) clipDesktop(r *http.Request, id vdi.Identity, toDesktop bool) (vdi.Desktop, error) {
	scope := vdi.ScopeSee
	if toDesktop {
		scope = vdi.ScopeAct
	}
	if err := id.May(scope); err != nil {
		return vdi.Desktop{}, err
	}
	d, err := h.desktops.Desktop(r.Context(), id, ref(r)) // holder or admin
	if err == nil && d.Holder != id.Login {
		err = vdi.Errorf(vdi.EForbidden, "Ask "+d.Holder+" to invite you with control.",
			"Only %s and those they gave control use the clipboard of %s.", d.Holder, d.Ref())
	} else if vdi.ErrorCode(err) == vdi.EForbidden {
		var sh vdi.Share
		if d, sh, err = h.desktops.SharedDesktop(r.Context(), id, ref(r)); err == nil && !sh.Control {
			err = vdi.Errorf(vdi.EForbidden, "Ask "+d.Holder+" for control.",
				"Your invitation to %s is view only: its clipboard is for those with control.", d.Ref())
		}
	}
	if err != nil {
		return vdi.Desktop{}, err
	}
	c := d.Console.Clipboard
	switch {
	case toDesktop && !c.ToDesktop():
		return d, vdi.Errorf(vdi.EForbidden, "Ask an admin if you need to paste into this desktop.",
			"The pool of %s does not let the clipboard carry anything into the desktop (clipboard %s).", d.Ref(), c)
	case !toDesktop && !c.FromDesktop():
		return d, vdi.Errorf(vdi.EForbidden, "Ask an admin if you need to copy out of this desktop.",
			"The pool of %s does not let the clipboard carry anything out of the desktop (clipboard %s).", d.Ref(), c)
	case h.images == nil || !h.images.HasClipboardImages(r.Context(), d.Ref()):
		return d, vdi.Errorf(vdi.EInvalid, "Send the picture as a file, or copy text.",
			"Not supported: the clipboard of %s carries text only.", d.Ref())
	}
	if wait, ok := h.limits.allow(id.Login, time.Now()); !ok {
		return d, &limitError{After: wait, Msg: "Too many clipboard pictures in a short time.",
			Hint: fmt.Sprintf("Wait %.0fs and try again: each user may move %d pictures at once and one a second after that.",
				math.Ceil(wait.Seconds()), h.limits.cfg.Burst)}
	}
	return d, nil
}

// clipImagesProps is the console page's pictures for d: nil where the
// panel offers none and need not say so (not the holder, a pool whose
// clipboard is off), no URL where d's clipboard carries text only.
func (h *clipImageRoutes) clipImagesProps(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.ClipImagesProps {
	switch {
	case d.Holder != id.Login || d.Console.Clipboard == vdi.ClipboardOff:
		return nil
	case h.images == nil || !h.images.HasClipboardImages(r.Context(), d.Ref()):
		return &views.ClipImagesProps{}
	}
	return &views.ClipImagesProps{URL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/clipboard/image"}
}

// handleClipImageGet serves GET /api/vdi/desktops/{ns}/{member}/clipboard/image:
// the PNG on the desktop's clipboard, never rendered on the portal's
// origin as anything but a picture. A read runs programs in the desktop
// and writes an audit row, so a browser's request another site's page
// made (an <img> it cannot read, with the identity a proxy adds anyway)
// is refused as changes from other sites are.
func (h *clipImageRoutes) handleClipImageGet(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return vdi.Errorf(vdi.EForbidden, "Use the clipboard panel of the desktop's console.",
			"The portal refused to read a desktop's clipboard picture for another site's page (Sec-Fetch-Site: %s).", site)
	}
	d, err := h.clipDesktop(r, id, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), clipImageTimeout)
	defer cancel()
	pic, err := h.images.ClipboardImage(ctx, d.Ref(), MaxClipImage)
	if err != nil {
		return err
	}
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "clipboard-image-out", Namespace: d.Namespace, Target: d.Name,
		Detail: clipDetail(pic, "from the desktop's clipboard")})
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(pic)
	return nil
}

// handleClipImagePut serves PUT /api/vdi/desktops/{ns}/{member}/clipboard/image:
// the body, a PNG, goes on the desktop's clipboard.
func (h *clipImageRoutes) handleClipImagePut(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.clipDesktop(r, id, true)
	if err != nil {
		return err
	}
	tooLarge := vdi.Errorf(vdi.ETooLarge, "Copy a smaller picture, or send it as a file.",
		"The picture is larger than the %d MiB a clipboard picture may have.", MaxClipImage>>20)
	if r.ContentLength > MaxClipImage {
		return tooLarge
	}
	pic, err := io.ReadAll(io.LimitReader(r.Body, MaxClipImage+1))
	if err != nil {
		return vdi.Errorf(vdi.EInvalid, "Try again.", "The picture did not arrive whole: %v.", err)
	}
	if len(pic) > MaxClipImage {
		return tooLarge
	}
	ctx, cancel := context.WithTimeout(r.Context(), clipImageTimeout)
	defer cancel()
	if err := h.images.SetClipboardImage(ctx, d.Ref(), pic); err != nil {
		return err
	}
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "clipboard-image-in", Namespace: d.Namespace, Target: d.Name,
		Detail: clipDetail(pic, "onto the desktop's clipboard")})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// clipDetail is an audit row's words for a picture that went where.
func clipDetail(pic []byte, where string) string {
	cfg, err := png.DecodeConfig(bytes.NewReader(pic))
	if err != nil { // the backend checked it: not reached
		return fmt.Sprintf("%d bytes %s", len(pic), where)
	}
	return fmt.Sprintf("a %d×%d PNG, %d bytes, %s", cfg.Width, cfg.Height, len(pic), where)
}
