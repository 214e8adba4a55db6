package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PeerRequest sends a plain request (no websocket) to the peer portal at
// base, on route under PeerPath, signed for kind about ns/member as a
// link is (SignPeer), with header's fields besides.
func PeerRequest(ctx context.Context, method, base string, secret []byte, route, kind, ns, member string, header http.Header) (*http.Response, error) {
	return peerRequest(ctx, method, base, secret, route, kind, ns, member, header, nil)
}

// PeerPost sends body (JSON) to the peer portal at base, on route under
// PeerPath, signed for exactly that route and body (BodyKind): a
// signature seen on the wire carries no other body, and (checked by a
// PeerVerifier) is good once.
func PeerPost(ctx context.Context, base string, secret []byte, route string, body []byte) (*http.Response, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	return peerRequest(ctx, http.MethodPost, base, secret, route, BodyKind(route, body), "", "", h, body)
}

// BodyKind is what a peer request carrying body on route is signed for:
// the route and a digest of the body.
func BodyKind(route string, body []byte) string {
	sum := sha256.Sum256(body)
	return "body/" + route + "/" + hex.EncodeToString(sum[:])
}

func peerRequest(ctx context.Context, method, base string, secret []byte, route, kind, ns, member string, header http.Header, body []byte) (*http.Response, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("peer %q: %w", base, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + PeerPath + route
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set(PeerAuthHeader, SignPeer(secret, time.Now(), u.Host, kind, ns, member))
	return peerClient.Do(req)
}

// peerClient sends the peer requests (the links are websockets of their
// own). In a claim storm every replica forwards most claims to the others
// (vdi's claims by shard), several to one replica at once in a burst, and
// http.DefaultClient keeps two idle connections to each: the others were
// closed after their answer, and the next burst's forwards each paid a
// new connection (a TLS handshake, where peers use TLS) on their way to
// their Lease.
var peerClient = &http.Client{Transport: peerTransport()}

// peerIdleConns is how many idle connections peerClient keeps to each
// replica: a burst's forwards at once.
const peerIdleConns = 64

func peerTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = peerIdleConns
	return t
}

// HeldKind is what a question about the record version of a replica's
// terminal or serial console of protocol is signed for: a console
// protocol has no slash, so it names no link.
func HeldKind(protocol, version string) string { return "held/" + protocol + "/" + version }

// Held is a peer's answer to PeerHolds.
type Held struct {
	Held bool `json:"held"`
}

// PeerHolds asks the peer portal at base whether it uses the record
// version of its console protocol of ns/member, or is writing a record of
// it (GET PeerPath + "held/{protocol}/{version}/{ns}/{member}", which
// changes nothing). A replica that answers false never uses that record
// again: another may take it over.
func PeerHolds(ctx context.Context, base string, secret []byte, protocol, version, ns, member string) (bool, error) {
	route := "held/" + url.PathEscape(protocol) + "/" + url.PathEscape(version) + "/" + url.PathEscape(ns) + "/" + url.PathEscape(member)
	res, err := PeerRequest(ctx, http.MethodGet, base, secret, route, HeldKind(protocol, version), ns, member, nil)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("peer %s: held %s of %s/%s: %s", base, protocol, ns, member, res.Status)
	}
	var h Held
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<10)).Decode(&h); err != nil {
		return false, fmt.Errorf("peer %s: held %s of %s/%s: %w", base, protocol, ns, member, err)
	}
	return h.Held, nil
}
