package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestRDPTokens_Replicas: replicas that share CORRAL_VDI_TOKEN_KEYS accept
// each other's tokens, through a rotation too; one with other keys refuses
// them and says why, once; forged and stolen tokens stay refused.
func TestRDPTokens_Replicas(t *testing.T) {
	oldKey, newKey, otherKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	ref := vdi.Ref{Namespace: "ns", Name: "desk-1"}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	replica := func(keys ...[]byte) *RDPTokens { return NewRDPTokens(keys, log) }

	tests := []struct {
		name       string
		mint, chk  *RDPTokens
		want       error
		mintLogin  string
		checkLogin string
	}{
		{"SameKeys", replica(oldKey), replica(oldKey), nil, "alice", "alice"},
		// Mid-rotation: one replica already signs with the new key, the
		// other still with the old one; each knows both.
		{"RotatedMinterOldChecker", replica(newKey, oldKey), replica(oldKey, newKey), nil, "alice", "alice"},
		{"OldMinterRotatedChecker", replica(oldKey), replica(newKey, oldKey), nil, "alice", "alice"},
		// After the old key is dropped, its tokens are refused.
		{"OldKeyRotatedOut", replica(oldKey), replica(newKey), ErrRDPTokenForeignKey, "alice", "alice"},
		{"OtherKeys", replica(otherKey), replica(oldKey), ErrRDPTokenForeignKey, "alice", "alice"},
		{"NoKeysEachProcessItsOwn", replica(), replica(), ErrRDPTokenForeignKey, "alice", "alice"},
		{"AnotherUser", replica(oldKey), replica(oldKey), ErrRDPTokenInvalid, "alice", "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.mint.Mint(tt.mintLogin, ref)
			if err := tt.chk.Check(tok, tt.checkLogin, ref); !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("check(token of %s) as %s = %v; want %v", tt.mintLogin, tt.checkLogin, err, tt.want)
			}
		})
	}

	t.Run("ForeignKeyLoggedOnce", func(t *testing.T) {
		logs.Reset()
		a, b := replica(otherKey), replica(oldKey)
		for range 3 {
			b.Check(a.Mint("alice", ref), "alice", ref)
		}
		if n := strings.Count(logs.String(), "must share CORRAL_VDI_TOKEN_KEYS"); n != 1 {
			t.Fatalf("foreign key logged %d times; want once:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), a.KeyID()) || !strings.Contains(logs.String(), b.KeyID()) {
			t.Errorf("log %q; want both key ids (%s, %s) so an operator sees which replica differs", logs.String(), a.KeyID(), b.KeyID())
		}
		if strings.Contains(logs.String(), string(oldKey)) {
			t.Error("log carries key material")
		}
	})

	t.Run("ForgedKeyIDsBounded", func(t *testing.T) {
		b := replica(oldKey)
		for i := range 10 * maxWarnedKeys {
			forged := forgeClaims(t, rdpClaims{Login: "alice", Desktop: ref.String(), Expires: time.Now().Add(time.Minute).Unix(), Key: strings.Repeat("x", i%40) + string(rune('a'+i%26)) + strings.Repeat("y", i)})
			if err := b.Check(forged, "alice", ref); !errors.Is(err, ErrRDPTokenForeignKey) {
				t.Fatalf("forged key id: %v; want refused as a foreign key", err)
			}
		}
		if len(b.warned) > maxWarnedKeys {
			t.Errorf("remembered %d forged key ids; want at most %d", len(b.warned), maxWarnedKeys)
		}
	})

	t.Run("ForgedSignatureWithKnownKeyID", func(t *testing.T) {
		b := replica(oldKey)
		forged := forgeClaims(t, rdpClaims{Login: "alice", Desktop: ref.String(), Expires: time.Now().Add(time.Minute).Unix(), Key: b.KeyID()})
		if err := b.Check(forged, "alice", ref); !errors.Is(err, ErrRDPTokenInvalid) {
			t.Fatalf("forged signature under the right key id: %v; want invalid", err)
		}
	})

	t.Run("ExtendedExpiry", func(t *testing.T) {
		a := replica(oldKey)
		tok := a.Mint("alice", ref)
		payload, sig, _ := strings.Cut(tok, ".")
		b, _ := base64.RawURLEncoding.DecodeString(payload)
		var c rdpClaims
		json.Unmarshal(b, &c)
		c.Expires += 3600
		b, _ = json.Marshal(c)
		if err := a.Check(base64.RawURLEncoding.EncodeToString(b)+"."+sig, "alice", ref); !errors.Is(err, ErrRDPTokenInvalid) {
			t.Fatalf("token with a later expiry under the old signature: %v; want invalid", err)
		}
	})

	t.Run("KeyIDRevealsNoKey", func(t *testing.T) {
		if a, b := replica(oldKey).KeyID(), replica(oldKey).KeyID(); a != b || len(a) != 12 {
			t.Fatalf("key ids %q, %q; want equal 12-hex ids for one key", a, b)
		}
		if replica(oldKey).KeyID() == replica(newKey).KeyID() {
			t.Fatal("two keys with one id")
		}
	})
}

// forgeClaims builds a token with claims c and a signature of zeros.
func forgeClaims(t *testing.T, c rdpClaims) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 32))
}

// TestRDPTokens_Expiry: a token opens its console until RDPTokenTTL has
// passed, then is refused as expired (the page asks /connect again), and
// WithClock keeps the keys so the refusal is expiry, not a foreign key.
func TestRDPTokens_Expiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tokens := NewRDPTokens([][]byte{bytes.Repeat([]byte{7}, 32)}, nil).WithClock(func() time.Time { return now })
	ref := vdi.Ref{Namespace: "ns", Name: "desk-1"}
	tok := tokens.Mint("alice", ref)
	tests := []struct {
		name  string
		after time.Duration
		ref   vdi.Ref
		want  error
	}{
		{"Fresh", 0, ref, nil},
		{"JustBeforeTTL", RDPTokenTTL - time.Second, ref, nil},
		{"AtTTL", RDPTokenTTL, ref, ErrRDPTokenExpired},
		{"OtherDesktop", 0, vdi.Ref{Namespace: "ns", Name: "desk-2"}, ErrRDPTokenInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			later := tokens.WithClock(func() time.Time { return now.Add(tt.after) })
			if err := later.Check(tok, "alice", tt.ref); !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("Check after %v on %s = %v; want %v", tt.after, tt.ref, err, tt.want)
			}
		})
	}
}

// TestRDPTokens_Purpose: a token passes only for the purpose it was minted
// for: an RDP token is no grant of control, a grant of control of alice's
// desktop none of bob's holding it later, and no RDP token either.
func TestRDPTokens_Purpose(t *testing.T) {
	tokens := NewRDPTokens([][]byte{bytes.Repeat([]byte{7}, 32)}, slog.New(slog.DiscardHandler))
	ref := vdi.Ref{Namespace: "ns", Name: "desk-1"}
	rdp := tokens.Mint("ops", ref)
	grant := tokens.MintFor(ControlPurpose("alice"), "ops", ref)
	for _, c := range []struct {
		name, purpose, tok string
		want               error
	}{
		{"GrantForItsHolder", ControlPurpose("alice"), grant, nil},
		{"RDPTokenAsGrant", ControlPurpose("alice"), rdp, ErrRDPTokenInvalid},
		{"GrantForTheNextHolder", ControlPurpose("bob"), grant, ErrRDPTokenInvalid},
		{"GrantAsRDPToken", "", grant, ErrRDPTokenInvalid},
		{"RDPToken", "", rdp, nil},
	} {
		if err := tokens.CheckFor(c.purpose, c.tok, "ops", ref); !errors.Is(err, c.want) {
			t.Errorf("%s: CheckFor(%q) = %v; want %v", c.name, c.purpose, err, c.want)
		}
	}
}
