package relay

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Peer portals: a portal that cannot reach a desktop asks a peer portal that
// can. The peer link is a websocket to the peer's PeerPath carrying the
// desktop stream in binary frames, plus terminal resize control messages
// (see ParseResize) as text frames. The request is signed with a secret the
// portals share: PeerAuthHeader holds "v2 <unix seconds> <nonce> <hex
// HMAC-SHA256>" over the version, time, nonce, the receiving peer's host
// (as the caller addressed it), protocol, namespace and member. So a
// signature is good for one console of one member at one peer, within
// PeerAuthSkew, and (with a PeerVerifier) once: a signature seen on the
// wire cannot be replayed, nor sent to another peer. Use TLS between
// peers all the same: the stream itself is not encrypted by the link.
// The peer dials only members its own backend resolves: the caller names
// a member, never an address.

const (
	// PeerPath is the route prefix a portal serves peer links under:
	// PeerPath + "{protocol}/{ns}/{member}".
	PeerPath = "/peer/v1/"
	// PeerAuthHeader carries a peer link's signature.
	PeerAuthHeader = "Corral-Peer-Auth"
	// PeerAuthSkew is how far a signature's time may be from the peer's clock.
	PeerAuthSkew = 30 * time.Second
)

// ErrPeerAuth is returned by CheckPeerAuth for a missing, malformed, stale,
// replayed or wrong signature.
var ErrPeerAuth = errors.New("peer signature not valid")

// peerMAC is the signature of one peer link request.
func peerMAC(secret []byte, ts int64, nonce, peer, protocol, ns, member string) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "v2\n%d\n%s\n%s\n%s\n%s\n%s", ts, nonce, strings.ToLower(peer), protocol, ns, member)
	return hex.EncodeToString(m.Sum(nil))
}

// SignPeer returns the PeerAuthHeader value for a link to console protocol
// of ns/member at the peer whose host (host:port, as in its URL) is peer,
// at time now, with a fresh nonce.
func SignPeer(secret []byte, now time.Time, peer, protocol, ns, member string) string {
	header, _ := signPeer(secret, now, peer, protocol, ns, member)
	return header
}

// signPeer is SignPeer that also returns the signature's nonce.
func signPeer(secret []byte, now time.Time, peer, protocol, ns, member string) (header, nonce string) {
	ts := now.Unix()
	b := make([]byte, 16)
	rand.Read(b)
	nonce = hex.EncodeToString(b)
	return "v2 " + strconv.FormatInt(ts, 10) + " " + nonce + " " + peerMAC(secret, ts, nonce, peer, protocol, ns, member), nonce
}

// CheckPeerAuth reports, as a nil error, whether header is a valid
// signature for console protocol of ns/member at this peer, reached as
// host, at time now, and returns its nonce. It does not remember nonces:
// PeerVerifier does.
func CheckPeerAuth(secret []byte, header string, now time.Time, host, protocol, ns, member string) (nonce string, err error) {
	if len(secret) == 0 {
		return "", ErrPeerAuth
	}
	f := strings.Fields(header)
	if len(f) != 4 || f[0] != "v2" || len(f[2]) != 32 {
		return "", ErrPeerAuth
	}
	ts, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", ErrPeerAuth
	}
	if d := now.Sub(time.Unix(ts, 0)); d > PeerAuthSkew || d < -PeerAuthSkew {
		return "", fmt.Errorf("%w: time %d is %v off", ErrPeerAuth, ts, d.Round(time.Second))
	}
	if !hmac.Equal([]byte(f[3]), []byte(peerMAC(secret, ts, f[2], host, protocol, ns, member))) {
		return "", ErrPeerAuth
	}
	return f[2], nil
}

// PeerVerifier checks peer signatures and accepts each nonce once. The
// zero value is not usable; see NewPeerVerifier.
type PeerVerifier struct {
	secret []byte

	mu   sync.Mutex
	seen map[string]time.Time // nonce -> when it stops being valid anyway
}

// NewPeerVerifier returns a verifier for signatures made with secret.
func NewPeerVerifier(secret []byte) *PeerVerifier {
	return &PeerVerifier{secret: secret, seen: map[string]time.Time{}}
}

// maxNonces bounds the nonces remembered; beyond it links are refused
// until old ones expire (a flood of valid signatures needs the secret).
const maxNonces = 1 << 16

// Check is CheckPeerAuth that also refuses a nonce seen before. The
// nonce names the link (a video link names the screen link it joins).
func (v *PeerVerifier) Check(header string, now time.Time, host, protocol, ns, member string) (nonce string, err error) {
	nonce, err = CheckPeerAuth(v.secret, header, now, host, protocol, ns, member)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.seen) >= maxNonces/2 {
		for n, until := range v.seen {
			if now.After(until) {
				delete(v.seen, n)
			}
		}
	}
	if _, dup := v.seen[nonce]; dup {
		return "", fmt.Errorf("%w: replayed", ErrPeerAuth)
	}
	if len(v.seen) >= maxNonces {
		return "", fmt.Errorf("%w: too many links at once", ErrPeerAuth)
	}
	v.seen[nonce] = now.Add(2*PeerAuthSkew + time.Second)
	return nonce, nil
}

// DialPeer opens a peer link to console protocol of ns/member through the
// peer portal at base (e.g. "http://10.0.0.2:8080"), until ctx ends. The
// returned stream carries resizes on to the peer.
func DialPeer(ctx context.Context, base string, secret []byte, protocol, ns, member string) (*PeerConn, error) {
	ws, err := dialPeerLink(ctx, base, secret, url.PathEscape(protocol), protocol, ns, member)
	if err != nil {
		return nil, err
	}
	return &PeerConn{ws}, nil
}

// dialPeerLink opens the websocket of a peer link at base's PeerPath +
// route + "/{ns}/{member}", signed for console, as a stream.
func dialPeerLink(ctx context.Context, base string, secret []byte, route, console, ns, member string) (*WSConn, error) {
	ws, _, err := dialPeerWS(ctx, base, secret, route, console, ns, member)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(DefaultMaxMessage) // the peer's frames are at most its copy buffer
	return NewWSConn(ws, WSConnOptions{}), nil
}

// dialPeerWS opens the websocket of a peer link at base's PeerPath +
// route + "/{ns}/{member}", signed for console, and returns the
// signature's nonce, which names the link at the peer.
func dialPeerWS(ctx context.Context, base string, secret []byte, route, console, ns, member string) (_ *websocket.Conn, nonce string, _ error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, "", fmt.Errorf("peer %q: %w", base, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, "", fmt.Errorf("peer %q: want an http:// or https:// URL", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + PeerPath + route + "/" + url.PathEscape(ns) + "/" + url.PathEscape(member)
	sig, nonce := signPeer(secret, time.Now(), u.Host, console, ns, member)
	d := websocket.Dialer{ReadBufferSize: peerBufferSize, WriteBufferSize: peerBufferSize, WriteBufferPool: writeBufferPool}
	ws, res, err := d.DialContext(ctx, u.String(), http.Header{PeerAuthHeader: {sig}})
	if err != nil {
		if res != nil {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			res.Body.Close()
			return nil, "", &PeerRefusal{Peer: base, Status: res.StatusCode, Msg: res.Status + ": " + strings.TrimSpace(string(body))}
		}
		return nil, "", fmt.Errorf("peer %s: %w", base, err)
	}
	return ws, nonce, nil
}

// PeerRefusal is a peer portal's answer refusing a link: it is there,
// and said no.
type PeerRefusal struct {
	Peer   string // the peer's base URL
	Status int    // its HTTP status
	Msg    string // status line and body, short
}

func (e *PeerRefusal) Error() string { return "peer " + e.Peer + ": " + e.Msg }

// PeerConn is a peer link: a WSConn that also carries terminal resizes
// on to the peer, as resize control messages in text frames.
type PeerConn struct {
	*WSConn
}

var (
	_ net.Conn = (*PeerConn)(nil)
	_ Resizer  = (*PeerConn)(nil)
)

// Resize implements Resizer.
func (c *PeerConn) Resize(cols, rows uint16) error {
	return c.writeText(ResizeMessage(Resize{Cols: cols, Rows: rows}))
}
