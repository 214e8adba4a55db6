package console

import (
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestUSBTokens(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tokens := &USBTokens{key: []byte("0123456789abcdef0123456789abcdef"), now: func() time.Time { return now }}
	vm := vdi.Ref{Namespace: "vdi", Name: "win-3"}
	tok := tokens.Mint("alice", vm)
	if got, issued, err := tokens.Login(tok, vm); err != nil || got != "alice" || !issued.Equal(now) {
		t.Fatalf("login(own token) = %q, %v, %v; want alice, minted %v", got, issued, err, now)
	}
	other := &USBTokens{key: []byte("fedcba9876543210fedcba9876543210"), now: tokens.now}
	for name, tc := range map[string]struct {
		t   *USBTokens
		tok string
		ref vdi.Ref
	}{
		"OtherDesktop":   {tokens, tok, vdi.Ref{Namespace: "vdi", Name: "win-4"}},
		"OtherKey":       {other, tok, vm},
		"RDPToken":       {tokens, rdpTokenUnder(tokens.key, tokens.now).Mint("alice", vm), vm},
		"Garbage":        {tokens, "not-a-token", vm},
		"TamperedClaims": {tokens, "eyJ1IjoiYm9iIiwiZCI6InZkaS93aW4tMyIsImUiOjk5OTk5OTk5OTl9." + tok[len(tok)-43:], vm},
	} {
		if got, _, err := tc.t.Login(tc.tok, tc.ref); err == nil {
			t.Errorf("%s: login = %q; want refused", name, got)
		}
	}
	now = now.Add(USBTokenTTL)
	if _, _, err := tokens.Login(tok, vm); err == nil {
		t.Error("an expired token still opens USB")
	}
}

// rdpTokenUnder is an RDP token issuer with the same key and clock, whose
// tokens must not open USB.
func rdpTokenUnder(key []byte, now func() time.Time) *RDPTokens {
	t := NewRDPTokens([][]byte{key}, nil)
	t.now = now
	return t
}
