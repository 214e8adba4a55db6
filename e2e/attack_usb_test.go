package e2e

import (
	"net/http"
	"testing"
)

// usbAttacks are the rows of USB redirection: the holder's own VM only,
// never an admin's device in someone's desktop, never cross-origin, never
// a session desktop, never with a made-up token.
func usbAttacks() []attack {
	return []attack{
		{
			name: "USBRedirByNonHolder",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "mallory", "Origin", "http://"+a.host)
			},
			status: 403, says: "is not yours",
		},
		{
			name: "USBRedirByAdminNotHolder",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", admin, "Origin", "http://"+a.host)
			},
			status: 403, says: "Only the desktop's holder",
		},
		{
			name: "USBRedirCrossOrigin",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://evil.example")
			},
			status: 403, says: "origin",
		},
		{
			name: "USBRedirSessionDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 400, says: "Not supported: USB needs a KubeVirt or QEMU VM",
		},
		{
			name: "USBRedirForgedToken",
			attack: func(t *testing.T, a *arena) *http.Response {
				forged := "eyJ1IjoiYWxpY2UiLCJkIjoibG9jYWwvZGVtby0xIiwiZSI6OTk5OTk5OTk5OX0.AAAA"
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Authorization", "Bearer "+forged)
			},
			status: 401, says: "not valid",
		},
		{
			name: "USBRedirRebind",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Host", rebindTo+portOf(a.host),
					"Origin", "http://"+rebindTo+portOf(a.host), "Tailscale-User-Login", "alice")
			},
			status: 421, says: "CORRAL_VDI_PUBLIC_URL",
		},
	}
}
