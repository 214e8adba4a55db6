package handlers

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// settingLayout is the keyboard layout of the user's VMs
// (static/app/keys-layout.js).
const settingLayout = "keyboard"

// keyboardLayouts are the layouts static/app/layouts.js types with, by id
// (TestKeyboardLayouts_AsThePageHasThem).
var keyboardLayouts = []string{"us", "us-intl", "gb", "de", "ch", "fr", "es", "se"}

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

// setting is one setting the portal keeps per user: its name in the
// store and in the request's body, which values it takes, and the words
// for one it does not.
type setting struct {
	name  string
	valid func(string) bool
	// what names the setting in a refusal ("a Size choice"), example
	// says what to send instead, unread what the page does when the kept
	// value cannot be read.
	what, example, unread string
}

var (
	// sizeSetting is the console's Size choice.
	sizeSetting = setting{name: settingSize, valid: validSize, what: "a Size choice",
		example: `Send {"size": "fit"}, {"size": "actual"} or a size such as {"size": "1600x900"}, each side 1 to 65535.`,
		unread:  "the console shows Fit"}
	// layoutSetting is the keyboard layout VM consoles type with.
	layoutSetting = setting{name: settingLayout, valid: func(v string) bool { return slices.Contains(keyboardLayouts, v) },
		what: "a keyboard layout", example: `Send {"keyboard": "de"}, one of ` + strings.Join(keyboardLayouts, ", ") + ".",
		unread: "the console goes by the browser's keyboard"}
)

// kept returns id's kept value of s for the console page, "" when none is
// kept, it is no longer valid or it cannot be read (a failure to read it
// is logged, never the page's).
func (h *settingsRoutes) kept(ctx context.Context, id vdi.Identity, s setting) string {
	if h.settings == nil {
		return ""
	}
	v, err := h.settings.UserSetting(ctx, id.Login, s.name)
	if err != nil {
		h.log.Warn("the user's setting not read: "+s.unread, "setting", s.name, "user", id.Login, "err", err)
		return ""
	}
	if !s.valid(v) {
		return ""
	}
	return v
}

// sizeOf returns id's kept Size choice ("" for Fit).
func (h *settingsRoutes) sizeOf(ctx context.Context, id vdi.Identity) string {
	return h.kept(ctx, id, sizeSetting)
}

// layoutOf returns id's kept keyboard layout ("" for the browser's).
func (h *settingsRoutes) layoutOf(ctx context.Context, id vdi.Identity) string {
	return h.kept(ctx, id, layoutSetting)
}

// handleSet serves PUT /api/vdi/settings/{name} for s: {"<name>": value}
// becomes the user's setting on every console they open (204).
func (h *settingsRoutes) handleSet(s setting) func(http.ResponseWriter, *http.Request, vdi.Identity) error {
	return func(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
		if h.settings == nil {
			return vdi.Errorf(vdi.EUnavailable, "The choice still applies on this page; ask the operator for a history database.",
				"This portal keeps no settings.")
		}
		var req map[string]string
		if err := decodeOptionalJSON(r, &req); err != nil {
			return err
		}
		v := req[s.name]
		if !s.valid(v) {
			return vdi.Errorf(vdi.EInvalid, s.example, "%.40q is not %s.", v, s.what)
		}
		if err := h.settings.SetUserSetting(r.Context(), id.Login, s.name, v, time.Now()); err != nil {
			return err
		}
		h.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "setting", Target: s.name, Detail: v})
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
