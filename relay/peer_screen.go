package relay

import (
	"context"
	"net"
)

// Screen links: a replica that serves a client of a desktop whose screen
// another replica owns (holds the desktop's one upstream console and its
// hub) relays the client to the owner's hub over a screen link. The link
// is a peer link (see DialPeer) to PeerPath + "screen/{role}/{ns}/{member}"
// whose signature covers ScreenLink(role): a link signed for the view
// role cannot be presented as a control link, nor for another desktop,
// nor twice. The stream is the hub's RFB server side, as a local client
// of the hub gets it.

// The roles of a screen link: the role the first replica authorized.
const (
	ScreenControl = "control"
	ScreenView    = "view"
)

// ScreenLink is the console name a screen link in role is signed for.
// Console protocols have no slash, so it names no byte link.
func ScreenLink(role string) string { return "screen/" + role }

// DialPeerScreen opens a screen link to the hub of ns/member at the peer
// portal at base, in role, until ctx ends. A peer that does not own the
// screen refuses with a *PeerRefusal of status 409.
func DialPeerScreen(ctx context.Context, base string, secret []byte, role, ns, member string) (*ScreenConn, error) {
	ws, nonce, err := dialPeerWS(ctx, base, secret, "screen/"+role, ScreenLink(role), ns, member)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(DefaultMaxMessage) // the peer's frames are at most its copy buffer
	return &ScreenConn{WSConn: NewWSConn(ws, WSConnOptions{}), Nonce: nonce}, nil
}

// ScreenConn is a screen link: the hub's RFB stream, and the nonce of
// its signature, which names the link at the owner (a video link to the
// owner joins it: DialPeerVideo).
type ScreenConn struct {
	*WSConn
	Nonce string
}

// StreamLink is the console name a stream link (a shared terminal or
// serial console of protocol, relayed to the replica holding it) in role
// is signed for.
func StreamLink(protocol, role string) string { return "stream/" + protocol + "/" + role }

// DialPeerStream opens a stream link to the shared terminal or serial
// console protocol of ns/member at the peer portal at base, in role. A
// peer that does not hold it refuses with a *PeerRefusal of status 409.
func DialPeerStream(ctx context.Context, base string, secret []byte, protocol, role, ns, member string) (net.Conn, error) {
	ws, err := dialPeerLink(ctx, base, secret, "stream/"+protocol+"/"+role, StreamLink(protocol, role), ns, member)
	if err != nil {
		return nil, err
	}
	return &PeerConn{ws}, nil
}
