package console

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// RDPTokenTTL is how long a token from /connect opens an RDP connection.
// The page asks /connect right before it connects, and again on reconnect.
const RDPTokenTTL = 2 * time.Minute

// Errors of RDPTokens.Check.
var (
	// ErrRDPTokenInvalid is a token forged, tampered with, or minted for
	// another user or desktop.
	ErrRDPTokenInvalid = errors.New("RDP token is not valid for this user and desktop")
	// ErrRDPTokenExpired is a token past RDPTokenTTL.
	ErrRDPTokenExpired = errors.New("RDP token expired")
	// ErrRDPTokenForeignKey is a token that names a signing key this
	// portal does not have: minted by a replica with other
	// CORRAL_VDI_TOKEN_KEYS, by a key rotated out, or forged.
	ErrRDPTokenForeignKey = errors.New("RDP token signed with a key this portal does not have")
)

// RDPTokens mints and checks the short-lived tokens IronRDP sends to the
// gateway as RDCleanPath proxy_auth: an HMAC over the holder, the desktop
// and an expiry time, so a token opens only that desktop for that user.
//
// Replicas behind one address share the keys (CORRAL_VDI_TOKEN_KEYS): a
// page may ask one replica for /connect and open the websocket on another.
// Tokens are signed with the newest key and checked against every key, so
// a rotation (prepend the new key, roll the replicas, drop the old one)
// never refuses a token in flight. Each token names its key by a short id,
// so a replica that lacks the key says so instead of "forged".
type RDPTokens struct {
	keys []rdpKey // newest first
	now  func() time.Time
	log  *slog.Logger

	mu     sync.Mutex
	warned map[string]bool // foreign key ids already logged
}

// rdpKey is one signing key and its public id.
type rdpKey struct {
	id  string
	mac []byte
}

// NewRDPTokens returns tokens signed with keys (newest first), or with a
// random key of this process when keys is empty.
func NewRDPTokens(keys [][]byte, log *slog.Logger) *RDPTokens {
	if log == nil {
		log = slog.Default()
	}
	t := &RDPTokens{now: time.Now, log: log, warned: map[string]bool{}}
	if len(keys) == 0 {
		key := make([]byte, 32)
		rand.Read(key) // crypto/rand does not fail on supported platforms
		keys = [][]byte{key}
	}
	for _, k := range keys {
		t.keys = append(t.keys, deriveRDPKey(k))
	}
	return t
}

// deriveRDPKey makes the token-signing key of a configured secret: its own
// HKDF purpose, so the same secret used elsewhere signs nothing else here.
func deriveRDPKey(secret []byte) rdpKey {
	mac, err := hkdf.Key(sha256.New, secret, nil, "corral-vdi rdp token", 32)
	if err != nil {
		panic(err) // only for lengths beyond 255*32 bytes
	}
	sum := sha256.Sum256(mac)
	return rdpKey{id: hex.EncodeToString(sum[:6]), mac: mac}
}

// WithClock returns tokens with t's keys that read the time from now:
// for tests that need a token to expire.
func (t *RDPTokens) WithClock(now func() time.Time) *RDPTokens {
	return &RDPTokens{keys: t.keys, now: now, log: t.log, warned: map[string]bool{}}
}

// KeyID returns the id of the key tokens are signed with now: replicas
// that share CORRAL_VDI_TOKEN_KEYS have the same one. It reveals nothing
// about the key.
func (t *RDPTokens) KeyID() string { return t.keys[0].id }

type rdpClaims struct {
	Login   string `json:"u"`
	Desktop string `json:"d"`
	Expires int64  `json:"e"`
	Key     string `json:"k"`
	// Purpose is empty for an RDP token, else what else the token lets
	// its user do (MintFor), so that one kind never passes for another.
	Purpose string `json:"p,omitempty"`
}

// Mint returns a token for login to open ref's RDP console.
func (t *RDPTokens) Mint(login string, ref vdi.Ref) string { return t.MintFor("", login, ref) }

// MintFor returns a token for login to do purpose on ref (a control grant:
// ControlPurpose), good for RDPTokenTTL and checked by CheckFor with the
// same purpose only.
func (t *RDPTokens) MintFor(purpose, login string, ref vdi.Ref) string {
	k := t.keys[0]
	b, _ := json.Marshal(rdpClaims{Login: login, Desktop: ref.String(), Expires: t.now().Add(RDPTokenTTL).Unix(), Key: k.id, Purpose: purpose})
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(sign(k, payload))
}

func sign(k rdpKey, payload string) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte("corral-rdp-v2:" + payload))
	return m.Sum(nil)
}

// Check returns nil if tok was minted with one of t's keys for login and
// ref and has not expired; ErrRDPTokenExpired if it has expired;
// ErrRDPTokenForeignKey if it names a key t lacks (logged once per key, as
// it means replicas with different keys); else ErrRDPTokenInvalid.
func (t *RDPTokens) Check(tok, login string, ref vdi.Ref) error {
	return t.CheckFor("", tok, login, ref)
}

// CheckFor is Check for a token minted by MintFor for purpose.
func (t *RDPTokens) CheckFor(purpose, tok, login string, ref vdi.Ref) error {
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return ErrRDPTokenInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return ErrRDPTokenInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return ErrRDPTokenInvalid
	}
	var c rdpClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return ErrRDPTokenInvalid
	}
	i := slices.IndexFunc(t.keys, func(k rdpKey) bool { return k.id == c.Key })
	if i < 0 {
		t.warnForeign(c.Key)
		return ErrRDPTokenForeignKey
	}
	if !hmac.Equal(got, sign(t.keys[i], payload)) {
		return ErrRDPTokenInvalid
	}
	if c.Login != login || c.Desktop != ref.String() || c.Purpose != purpose {
		return ErrRDPTokenInvalid
	}
	if !t.now().Before(time.Unix(c.Expires, 0)) {
		return ErrRDPTokenExpired
	}
	return nil
}

// ControlPurpose is the purpose (MintFor) of a grant of control of a
// desktop's screen held by holder: what an admin watching gets when the
// holder allows their request.
func ControlPurpose(holder string) string { return "control:" + holder }

// maxWarnedKeys bounds the foreign key ids remembered for logging, so
// forged ids cannot grow memory; past it every one is logged at debug.
const maxWarnedKeys = 64

// warnForeign logs, once per key id, that a token named a key this portal
// does not have: the sign of replicas configured with different keys.
func (t *RDPTokens) warnForeign(id string) {
	if len(id) > 12 {
		id = id[:12] + "…"
	}
	t.mu.Lock()
	first := !t.warned[id] && len(t.warned) < maxWarnedKeys
	if first {
		t.warned[id] = true
	}
	t.mu.Unlock()
	ids := make([]string, len(t.keys))
	for i, k := range t.keys {
		ids[i] = k.id
	}
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	t.log.Log(context.Background(), level, "RDP token signed with a key this replica does not have: replicas behind one address must share CORRAL_VDI_TOKEN_KEYS (or the token is forged, or its key was rotated out)",
		"tokenKey", id, "keys", strings.Join(ids, ","))
}
