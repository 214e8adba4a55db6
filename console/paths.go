package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Relay paths: a console connection reaches its desktop directly when it
// can, else through a peer portal, else through any further Path (the
// Kubernetes API server's KubeVirt subresources, from the kube backend).
// The path taken is recorded on the session.

const (
	// defaultDirectTimeout bounds the direct connection, so that falling
	// back to a peer costs well under a second when the desktop's network
	// is out of reach.
	defaultDirectTimeout = 750 * time.Millisecond
	// peerDialTimeout bounds opening a peer link.
	peerDialTimeout = 3 * time.Second
)

// Path names recorded on sessions.
const (
	PathDirect    = "direct"
	PathPeer      = "peer"
	PathAPIServer = "apiserver"
)

// A Path is one more way to a desktop's console, tried after the direct
// path and the peers: the KubeVirt subresource through the API server is
// one. Dial gets a member the caller has authorized; the target comes from
// the member, never from the client.
type Path interface {
	// Name is recorded on the session, e.g. "apiserver".
	Name() string
	Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error)
}

// Direct is the domain's own way to a desktop's console: the backend
// names the address from the member.
type Direct interface {
	Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error)
}

// Config configures a Console.
type Config struct {
	// Direct dials the member's advertised endpoint; required.
	Direct Direct
	// Peers are the base URLs of peer portals (http://host:port), tried in
	// order when the direct path fails.
	Peers []string
	// FindPeers, when set, names more peers, found rather than configured
	// (the other replicas that run and are not draining), tried after
	// Peers.
	FindPeers func(ctx context.Context) []string
	// PeerSecret signs peer links; without it no peer is asked.
	PeerSecret []byte
	// Paths are tried after the peers.
	Paths []Path
	// DirectTimeout bounds the direct connection; zero means 750ms.
	DirectTimeout time.Duration
	// Log gets fallbacks taken and consoles no path reaches; nil means
	// slog.Default().
	Log *slog.Logger
}

// Console opens console connections to desktops by the first path that
// works. It is safe for concurrent use.
type Console struct {
	direct        Direct
	peers         []string
	findPeers     func(ctx context.Context) []string
	secret        []byte
	paths         []Path
	directTimeout time.Duration
	log           *slog.Logger
	probes        probeCache
	// after runs f after d (time.AfterFunc; a test's own clock).
	after func(d time.Duration, f func())
}

// New returns a Console for cfg.
func New(cfg Config) *Console {
	c := &Console{direct: cfg.Direct, peers: cfg.Peers, findPeers: cfg.FindPeers, secret: cfg.PeerSecret, paths: cfg.Paths, directTimeout: cfg.DirectTimeout, log: cfg.Log}
	if c.directTimeout <= 0 {
		c.directTimeout = defaultDirectTimeout
	}
	if len(c.secret) == 0 {
		c.peers, c.findPeers = nil, nil
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	return c
}

// peerPath dials through one peer portal.
type peerPath struct {
	base   string
	secret []byte
}

func (p peerPath) Name() string { return PathPeer }

func (p peerPath) Dial(ctx context.Context, ref vdi.Ref, proto vdi.Protocol) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, peerDialTimeout)
	defer cancel()
	return relay.DialPeer(ctx, p.base, p.secret, string(proto), ref.Namespace, ref.Name)
}

// Dial connects to console p of ref, which the caller has authorized, by
// the first path that works and returns the path's name. Errors that no
// other path can mend (no such member, no such console, not running) end
// the search at once; when every path fails, the error names each.
func (c *Console) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, string, error) {
	return c.dial(ctx, ref, p, false)
}

// DialDirect is the direct path alone (the desktop's own server), for a
// connection made ahead of any console: it never takes the one viewer
// slot a KubeVirt VMI's subresource has.
func (c *Console) DialDirect(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.directTimeout)
	defer cancel()
	return c.direct.Dial(ctx, ref, p)
}

// DialAlongside is Dial for someone who watches alongside the holder: a
// VNC or serial console is not opened through the further Paths then,
// since KubeVirt lets one viewer in at a time and a new one would
// disconnect the holder's.
func (c *Console) DialAlongside(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, string, error) {
	return c.dial(ctx, ref, p, true)
}

func (c *Console) dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol, alongside bool) (net.Conn, string, error) {
	begin := time.Now()
	dctx, cancel := context.WithTimeout(ctx, c.directTimeout)
	conn, err := c.direct.Dial(dctx, ref, p)
	cancel()
	if err == nil {
		return conn, PathDirect, nil
	}
	if final(err) {
		return nil, "", err
	}
	fails := []string{"direct: " + RootCause(err)}
	peers := c.peers
	if c.findPeers != nil {
		peers = append(slices.Clip(peers), c.findPeers(ctx)...)
	}
	paths := make([]Path, 0, len(peers)+len(c.paths))
	for _, base := range peers {
		paths = append(paths, peerPath{base, c.secret})
	}
	hint := "Check that this portal or one of its peers (the other replicas, CORRAL_VDI_PEERS) can reach the desktop, then reconnect."
	if alongside && (p == vdi.ProtocolVNC || p == vdi.ProtocolSerial) && len(c.paths) > 0 {
		fails = append(fails, "the API server: not tried, one viewer at a time")
		hint = "Watching through the API server would disconnect the desktop's user (KubeVirt lets one " + string(p) +
			" viewer in at a time). Let this portal or a peer reach the desktop's IP, or assign the desktop to yourself."
	} else {
		paths = append(paths, c.paths...)
	}
	for _, path := range paths {
		pc, perr := path.Dial(ctx, ref, p)
		if perr == nil {
			c.log.Info("console reached through a fallback path", "desktop", ref, "protocol", p, "path", path.Name(),
				"direct_err", err, "elapsed", time.Since(begin).Round(time.Millisecond))
			return pc, path.Name(), nil
		}
		fails = append(fails, path.Name()+": "+RootCause(perr))
	}
	if len(paths) == 0 && len(fails) == 1 {
		return nil, "", err
	}
	c.log.Warn("no path reaches the console", "desktop", ref, "protocol", p, "tried", strings.Join(fails, "; "))
	return nil, "", &vdi.Error{Code: vdi.EUnavailable, Err: err,
		Msg:  fmt.Sprintf("No path reaches the %s console of %s (%s).", p, ref, strings.Join(fails, "; ")),
		Hint: hint}
}

// final reports whether err is one that another path cannot mend.
func final(err error) bool {
	var e *vdi.Error
	if errors.As(err, &e) {
		switch e.Code {
		case vdi.ENotFound, vdi.EForbidden, vdi.EInvalid:
			return true
		case vdi.EUnavailable:
			return e.Err == nil // "not running", said by the claim service itself
		}
	}
	return false
}

// RootCause is the innermost error's text, short enough for a message.
func RootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
