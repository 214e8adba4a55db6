package handlers

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Settings keeps each user's console settings on the portal (store.DB),
// so that they follow the user to another browser and any replica.
type Settings interface {
	// UserSetting returns login's setting name, "" when none is kept.
	UserSetting(ctx context.Context, login, name string) (string, error)
	// SetUserSetting keeps value as login's setting name.
	SetUserSetting(ctx context.Context, login, name, value string, at time.Time) error
}

// settingSize is the console's Size choice (static/app/size.js).
const settingSize = "size"

// settingsRoutes serves the user's own settings.
type settingsRoutes struct {
	auditTrail
	settings Settings
}

// sizeValue is a Size choice as size.js remembers it: fit, actual (1:1)
// or a fixed WxH. 65535 is the most RFB's SetDesktopSize carries; the
// desktop may refuse less, and says so when asked.
var sizeValue = regexp.MustCompile(`^(fit|actual|([1-9][0-9]{0,4})x([1-9][0-9]{0,4}))$`)

// validSize reports whether v is a Size choice the console can follow.
func validSize(v string) bool {
	m := sizeValue.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	if m[2] == "" {
		return true
	}
	w, _ := strconv.Atoi(m[2])
	h, _ := strconv.Atoi(m[3])
	return w <= 65535 && h <= 65535
}

// sizeOf returns id's kept Size choice for the console page, "" when none
// is kept or it cannot be read (the page then shows Fit; a failure to
// read it is logged, never the page's).
func (h *settingsRoutes) sizeOf(ctx context.Context, id vdi.Identity) string {
	if h.settings == nil {
		return ""
	}
	v, err := h.settings.UserSetting(ctx, id.Login, settingSize)
	if err != nil {
		h.log.Warn("the user's Size choice not read: the console shows Fit", "user", id.Login, "err", err)
		return ""
	}
	if !validSize(v) {
		return ""
	}
	return v
}

// sizeRequest is PUT /api/vdi/settings/size's body.
type sizeRequest struct {
	Size string `json:"size"`
}

// handleSizeSet serves PUT /api/vdi/settings/size: {"size": "fit"},
// "actual" or "1600x900" becomes the user's Size choice on every console
// they open (204).
func (h *settingsRoutes) handleSizeSet(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.settings == nil {
		return vdi.Errorf(vdi.EUnavailable, "The choice still applies in this browser; ask the operator for a history database.",
			"This portal keeps no settings.")
	}
	var req sizeRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	if !validSize(req.Size) {
		return vdi.Errorf(vdi.EInvalid, `Send {"size": "fit"}, {"size": "actual"} or a size such as {"size": "1600x900"}, each side 1 to 65535.`,
			"%.40q is not a Size choice.", req.Size)
	}
	if err := h.settings.SetUserSetting(r.Context(), id.Login, settingSize, req.Size, time.Now()); err != nil {
		return err
	}
	h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "setting", Target: settingSize, Detail: req.Size})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
