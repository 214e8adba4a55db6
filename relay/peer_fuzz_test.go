package relay

import (
	"strings"
	"testing"
	"time"
)

// FuzzCheckPeerAuth checks the peer link's auth header: no header panics
// the check, a fuzzed header never passes, and a header signed for one
// console never passes for another.
func FuzzCheckPeerAuth(f *testing.F) {
	secret := []byte("soak-peer-secret-0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Add(SignPeer(secret, now, "peer.example:8080", "vnc", "local", "demo-1"), "peer.example:8080", "vnc", "local", "demo-2")
	f.Add("v2 1800000000 00000000000000000000000000000000 deadbeef", "h", "rdp", "ns", "m")
	f.Add("v2 -9223372036854775808 "+strings.Repeat("a", 32)+" x", "h", "terminal", "ns", "m")
	f.Add("", "", "", "", "")
	f.Fuzz(func(t *testing.T, header, host, protocol, ns, member string) {
		if _, err := CheckPeerAuth(secret, header, now, host, protocol, ns, member); err == nil {
			t.Fatalf("fuzzed header %q passed for %s %s/%s at %s", header, protocol, ns, member, host)
		}
		signed := SignPeer(secret, now, host, protocol, ns, member)
		if _, err := CheckPeerAuth(secret, signed, now, host, protocol, ns, member); err != nil {
			t.Fatalf("a header signed for %s %s/%s at %q does not pass: %v", protocol, ns, member, host, err)
		}
		if _, err := CheckPeerAuth(secret, signed, now, host, protocol, ns, member+"x"); err == nil {
			t.Fatalf("a header signed for %s passed for %sx", member, member)
		}
	})
}
