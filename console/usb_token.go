package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// USBTokenTTL is how long a token from the console page opens a USB
// stream: long enough to copy the command into a terminal and run it.
const USBTokenTTL = 10 * time.Minute

// ErrUSBToken is a USB token forged, for another desktop, or expired.
var ErrUSBToken = errors.New("the USB token is not valid for this desktop, or has expired")

// USBTokens mints and checks the short-lived tokens `corral-vdi-portal usb
// redir --token` sends where no identity proxy signs the user in (OIDC):
// an HMAC over the holder, the desktop, when it was minted and an expiry,
// under a key of its own so that an RDP token never opens a USB stream or
// the other way. The handler ends a token minted before the user signed
// out (or an admin ended the user's sessions): Login returns when it was
// minted.
type USBTokens struct {
	key []byte
	now func() time.Time
}

// NewUSBTokens returns tokens signed with a key made for this process.
func NewUSBTokens() *USBTokens {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &USBTokens{key: key, now: time.Now}
}

func (t *USBTokens) sign(payload string) []byte {
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

// Mint returns a token for login to stream USB to ref.
func (t *USBTokens) Mint(login string, ref vdi.Ref) string {
	now := t.now()
	b, _ := json.Marshal(usbClaims{Login: login, Desktop: ref.String(), Expires: now.Add(USBTokenTTL).Unix(), Issued: now.UnixNano()})
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(t.sign(payload))
}

// Login returns whom tok was minted for and when, if t minted it for ref
// and it has not expired.
func (t *USBTokens) Login(tok string, ref vdi.Ref) (string, time.Time, error) {
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return "", time.Time{}, ErrUSBToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.sign(payload)) {
		return "", time.Time{}, ErrUSBToken
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", time.Time{}, ErrUSBToken
	}
	var c usbClaims
	if err := json.Unmarshal(b, &c); err != nil || c.Desktop != ref.String() || c.Login == "" || c.Issued == 0 || !t.now().Before(time.Unix(c.Expires, 0)) {
		return "", time.Time{}, ErrUSBToken
	}
	return c.Login, time.Unix(0, c.Issued), nil
}
