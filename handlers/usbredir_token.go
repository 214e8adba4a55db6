package handlers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// usbTokenTTL is how long a token from the console page opens a USB
// stream: long enough to copy the command into a terminal and run it.
const usbTokenTTL = 10 * time.Minute

var errUSBToken = errors.New("the USB token is not valid for this desktop, or has expired")

// usbTokens mints and checks the short-lived tokens `corral-vdi-portal usb
// redir --token` sends where no identity proxy signs the user in (OIDC):
// an HMAC over the holder, the desktop, when it was minted and an expiry,
// under a key of its own so that an RDP token never opens a USB stream or
// the other way. A sign-out (or an admin ending the user's sessions) after
// it was minted ends it (usbAPI).
type usbTokens struct {
	key []byte
	now func() time.Time
}

// usbTokenIssuer signs with a key made at start-up, like rdpTokenIssuer.
var usbTokenIssuer = newUSBTokens()

func newUSBTokens() *usbTokens {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &usbTokens{key: key, now: time.Now}
}

func (t *usbTokens) sign(payload string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte("corral-usbredir-v1:" + payload))
	return m.Sum(nil)
}

// usbClaims is what a USB token says.
type usbClaims struct {
	Login   string `json:"u"`
	Desktop string `json:"d"`
	Expires int64  `json:"e"` // unix seconds
	Issued  int64  `json:"i"` // unix nanoseconds
}

// mint returns a token for login to stream USB to ref.
func (t *usbTokens) mint(login string, ref vdi.Ref) string {
	now := t.now()
	b, _ := json.Marshal(usbClaims{Login: login, Desktop: ref.String(), Expires: now.Add(usbTokenTTL).Unix(), Issued: now.UnixNano()})
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(t.sign(payload))
}

// login returns whom tok was minted for and when, if t minted it for ref
// and it has not expired.
func (t *usbTokens) login(tok string, ref vdi.Ref) (string, time.Time, error) {
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return "", time.Time{}, errUSBToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.sign(payload)) {
		return "", time.Time{}, errUSBToken
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", time.Time{}, errUSBToken
	}
	var c usbClaims
	if err := json.Unmarshal(b, &c); err != nil || c.Desktop != ref.String() || c.Login == "" || c.Issued == 0 || !t.now().Before(time.Unix(c.Expires, 0)) {
		return "", time.Time{}, errUSBToken
	}
	return c.Login, time.Unix(0, c.Issued), nil
}

// usbSinceKey carries, on a request with a USB token, when it was minted.
type usbSinceKey struct{}

// usbAPI is api for /ws/usbredir: a request carrying "Authorization:
// Bearer <usb token>" is the token's user (never an admin), checked
// against the route's desktop; any other request is identified as usual.
func (h *Handler) usbAPI(fn handlerFunc) http.HandlerFunc {
	plain := h.api(fn)
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			plain(w, r)
			return
		}
		login, issued, err := usbTokenIssuer.login(strings.TrimSpace(tok), ref(r))
		if err != nil {
			writeJSON(w, http.StatusUnauthorized, api.Error{Msg: "The USB token is not valid for this desktop, or has expired.",
				Hint: "Copy a fresh command from the desktop's page and run it within " + usbTokenTTL.String() + "."})
			return
		}
		if h.auth.SignedOutSince(r.Context(), login, issued) {
			writeJSON(w, http.StatusUnauthorized, api.Error{Msg: "The USB token ended when you signed out, or when an admin ended your sessions.",
				Hint: "Sign in again and copy a fresh command from the desktop's page."})
			return
		}
		id := vdi.Identity{Login: login, Name: login}
		r = r.WithContext(context.WithValue(r.Context(), usbSinceKey{}, issued))
		if err := h.serveLimited(w, r, id, fn); err != nil {
			h.writeAPIError(w, r, err)
		}
	}
}

// USBToken mints the token the console page's `usb redir` command carries
// for login on ref.
func USBToken(login string, ref vdi.Ref) string { return usbTokenIssuer.mint(login, ref) }

// usbHint returns the console page's USB command for the holder of a VM
// on a portal that redirects USB, or nil.
func (h *Handler) usbHint(r *http.Request, id vdi.Identity, d vdi.Desktop) *views.USBHint {
	if d.Holder != id.Login || h.usbSupported(r.Context(), id, d) != nil || !h.isVM(r, id, d) {
		return nil
	}
	base := "http://" + r.Host
	if len(h.publicURLs) > 0 {
		base = strings.TrimSuffix(h.publicURLs[0], "/")
	}
	ref := d.Ref()
	return &views.USBHint{TokenTTL: fmt.Sprintf("%d minutes", int(usbTokenTTL.Minutes())), Command: "corral-vdi-portal usb redir --portal " + base + " " + ref.String() +
		" --device VID:PID --token " + usbTokenIssuer.mint(id.Login, ref)}
}

// isVM reports whether d belongs to a vm pool that id can see.
func (h *Handler) isVM(r *http.Request, id vdi.Identity, d vdi.Desktop) bool {
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return false
	}
	for _, p := range pools {
		if p.Namespace == d.Namespace && p.Name == d.Pool {
			return p.Kind == vdi.KindVM
		}
	}
	return false
}
