package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// peerAttacks are more rows of the peer link (relay.PeerPath; replay and
// another peer's signature are in attack_test.go): only a portal holding
// the shared secret, for exactly the console it signed; never a signed-in
// user, whose consoles go through the checks of /ws/… instead.
func peerAttacks() []attack {
	// sign is a peer portal's signature for the VNC console of member.
	sign := func(a *arena, secret, member string) string {
		return relay.SignPeer([]byte(secret), time.Now(), a.host, "vnc", "local", member)
	}
	return []attack{
		{
			name: "PeerLinkUnsigned",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"vnc/local/"+a.victim, "")
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "PeerLinkBySignedInUser",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"vnc/local/"+a.victim, "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Peer links are for peer portals",
		},
		{
			name: "PeerLinkWrongSecret",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"vnc/local/"+a.victim, "", relay.PeerAuthHeader, sign(a, "not-the-peer-secret-at-all", a.victim))
			},
			status: 401, says: "CORRAL_VDI_PEER_SECRET",
		},
		{
			name: "PeerLinkSignedForAnotherDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"vnc/local/"+a.victim, "", relay.PeerAuthHeader, sign(a, peerSecret, a.mallorys))
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		// Screen links (relay.DialPeerScreen): the signature covers the
		// role, the desktop and the replica, once; and only the owner of a
		// desktop's screen serves one.
		{
			name: "ScreenLinkUnsigned",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", screenLink("control", a.victim), "")
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "ScreenLinkViewSignatureAsControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.ScreenLink(relay.ScreenView), "local", a.victim)
				return a.dialWS(t, screenLink(relay.ScreenControl, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "ScreenLinkSignedForAnotherDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.ScreenLink(relay.ScreenView), "local", a.mallorys)
				return a.dialWS(t, screenLink(relay.ScreenView, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "ScreenLinkWrongSecret",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte("not-the-peer-secret-at-all"), time.Now(), a.host, relay.ScreenLink(relay.ScreenView), "local", a.victim)
				return a.dialWS(t, screenLink(relay.ScreenView, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "CORRAL_VDI_PEER_SECRET",
		},
		{
			name: "ScreenLinkExpired",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now().Add(-time.Minute), a.host, relay.ScreenLink(relay.ScreenView), "local", a.victim)
				return a.dialWS(t, screenLink(relay.ScreenView, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			// A peer relays to this portal as if it owned the screen of a
			// desktop nobody has open: refused, and nothing dialed.
			name: "ScreenLinkToAReplicaThatIsNotTheOwner",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.ScreenLink(relay.ScreenControl), "local", a.victim)
				return a.dialWS(t, screenLink(relay.ScreenControl, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 409, says: "does not own the screen",
		},
		// Video links (relay.DialPeerVideo): the video of one screen
		// link's viewer, named by that link's nonce, for the desktop the
		// signature names; only a peer portal's, once.
		{
			name: "VideoLinkUnsigned",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", videoLink("00112233445566778899aabbccddeeff", a.victim), "")
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "VideoLinkSignedForAnotherDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				nonce := "00112233445566778899aabbccddeeff"
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.VideoLink(nonce), "local", a.mallorys)
				return a.dialWS(t, videoLink(nonce, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			// The victim's screen is open (alice's console) and a screen
			// link of it is served; a video link signed for mallory's
			// desktop names that link's nonce: refused, before the
			// upgrade, and the victim's screen goes nowhere.
			name: "VideoLinkNamingAScreenLinkOfAnotherDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				a.console(t, "alice", "/ws/vnc/local/"+a.victim)
				link := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.ScreenLink(relay.ScreenView), "local", a.victim)
				if res := a.dialWS(t, screenLink(relay.ScreenView, a.victim), relay.PeerAuthHeader, link); res.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("the victim's screen link: %s; want it served", res.Status)
				}
				nonce := strings.Fields(link)[2]
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.VideoLink(nonce), "local", a.mallorys)
				return a.dialWS(t, videoLink(nonce, a.mallorys), relay.PeerAuthHeader, sig)
			},
			status: 409, says: "serves no screen link", consoles: 1,
		},
		// Stream links (relay.DialPeerStream): the same rules for a shared
		// terminal or serial console.
		{
			name: "StreamLinkViewSignatureAsControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.StreamLink("terminal", relay.ScreenView), "local", a.victim)
				return a.dialWS(t, streamLink("terminal", relay.ScreenControl, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "StreamLinkToAReplicaThatSharesNone",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, relay.StreamLink("terminal", relay.ScreenControl), "local", a.victim)
				return a.dialWS(t, streamLink("terminal", relay.ScreenControl, a.victim), relay.PeerAuthHeader, sig)
			},
			status: 409, says: "shares no terminal console",
		},
		// Viewers across replicas (handlers/watchers_peers.go): a replica's
		// list of who watches a desktop, and the holder's answer to a watch
		// waiting for consent, only for a peer portal, signed for exactly
		// that request.
		{
			name: "ViewersListUnsigned",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"viewers/local/"+a.victim, "")
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "ViewersListBySignedInUser",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", relay.PeerPath+"viewers/local/"+a.victim, "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Peer links are for peer portals",
		},
		{
			name: "ViewersListSignedForAnotherDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, "viewers/list", "local", a.mallorys)
				return a.do(t, "GET", relay.PeerPath+"viewers/local/"+a.victim, "", relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			// A refusal's signature presented as the holder's allowing.
			name: "WatchAnswerRefusalAsAllow",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, "viewers/answer/refuse", "local", a.victim)
				return a.do(t, "POST", relay.PeerPath+"viewers/local/"+a.victim+"/w-1/allow", "", relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			// A list request's signature presented as an answer.
			name: "WatchAnswerWithAListSignature",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, "viewers/list", "local", a.victim)
				return a.do(t, "POST", relay.PeerPath+"viewers/local/"+a.victim+"/w-1/allow", "", relay.PeerAuthHeader, sig)
			},
			status: 401, says: "Peer signature missing or not valid",
		},
		{
			name: "WatchAnswerBySignedInUser",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", relay.PeerPath+"viewers/local/"+a.victim+"/w-1/allow", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Peer links are for peer portals",
		},
	}
}

// streamLink is the path of a stream link in role to member's console
// protocol.
func streamLink(protocol, role, member string) string {
	return relay.PeerPath + "stream/" + protocol + "/" + role + "/local/" + member
}

// videoLink is the path of a video link joining the screen link of
// member named nonce.
func videoLink(nonce, member string) string {
	return relay.PeerPath + "video/" + nonce + "/local/" + member
}

// screenLink is the path of a screen link in role to member's screen.
func screenLink(role, member string) string {
	return relay.PeerPath + "screen/" + role + "/local/" + member
}
