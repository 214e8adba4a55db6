package handlers

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

// rdpTokenTTL is how long a token from /connect opens an RDP connection.
// The page asks /connect right before it connects, and again on reconnect.
const rdpTokenTTL = 2 * time.Minute

var (
	errRDPTokenInvalid = errors.New("RDP token is not valid for this user and desktop")
	errRDPTokenExpired = errors.New("RDP token expired")
)

// rdpTokens mints and checks the short-lived tokens IronRDP sends to the
// gateway as RDCleanPath proxy_auth: an HMAC over the holder, the desktop
// and an expiry time, so a token opens only that desktop for that user.
type rdpTokens struct {
	key []byte
	now func() time.Time
}

// rdpTokenIssuer signs with a key made at start-up: tokens live for minutes
// and are checked by the portal that minted them. Several replicas behind
// one address would need a shared key.
var rdpTokenIssuer = newRDPTokens()

func newRDPTokens() *rdpTokens {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &rdpTokens{key: key, now: time.Now}
}

type rdpClaims struct {
	Login   string `json:"u"`
	Desktop string `json:"d"`
	Expires int64  `json:"e"`
}

// mint returns a token for login to open ref's RDP console.
func (t *rdpTokens) mint(login string, ref vdi.Ref) string {
	b, _ := json.Marshal(rdpClaims{Login: login, Desktop: ref.String(), Expires: t.now().Add(rdpTokenTTL).Unix()})
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(t.sign(payload))
}

func (t *rdpTokens) sign(payload string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte("corral-rdp-v1:" + payload))
	return m.Sum(nil)
}

// check returns nil if tok was minted by t for login and ref and has not
// expired, errRDPTokenExpired if it has, else errRDPTokenInvalid.
func (t *rdpTokens) check(tok, login string, ref vdi.Ref) error {
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return errRDPTokenInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.sign(payload)) {
		return errRDPTokenInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return errRDPTokenInvalid
	}
	var c rdpClaims
	if err := json.Unmarshal(b, &c); err != nil || c.Login != login || c.Desktop != ref.String() {
		return errRDPTokenInvalid
	}
	if !t.now().Before(time.Unix(c.Expires, 0)) {
		return errRDPTokenExpired
	}
	return nil
}
