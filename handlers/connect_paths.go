package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Relay paths: a console connection reaches its desktop directly when it
// can, else through a peer portal, else through any further ConsolePath
// (the Kubernetes API server's KubeVirt subresources, from the kube
// backend). The path taken is recorded on the session.

const (
	// defaultDirectTimeout bounds the direct connection, so that falling
	// back to a peer costs well under a second when the desktop's network
	// is out of reach.
	defaultDirectTimeout = 750 * time.Millisecond
	// peerDialTimeout bounds opening a peer link.
	peerDialTimeout = 3 * time.Second
	// defaultPingEvery is how often an idle console websocket is pinged.
	defaultPingEvery = 20 * time.Second
)

// Path names recorded on sessions.
const (
	PathDirect    = "direct"
	PathPeer      = "peer"
	PathAPIServer = "apiserver"
)

// A ConsolePath is one more way to a desktop's console, tried after the
// direct path and the peers: the KubeVirt subresource through the API
// server is one. Dial gets a member the caller has authorized; the target
// comes from the member, never from the client.
type ConsolePath interface {
	// Name is recorded on the session, e.g. "apiserver".
	Name() string
	Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error)
}

// ConsoleConfig configures console connections.
type ConsoleConfig struct {
	// Peers are the base URLs of peer portals (http://host:port), tried in
	// order when the direct path fails.
	Peers []string
	// PeerSecret signs peer links both ways; without it this portal
	// neither asks peers nor serves them.
	PeerSecret []byte
	// Paths are tried after the peers.
	Paths []ConsolePath
	// DirectTimeout bounds the direct connection; zero means 750ms.
	DirectTimeout time.Duration
	// PingEvery is how often console websockets are pinged; zero means 20s.
	PingEvery time.Duration
	// TokenKeys sign the RDP tokens /connect hands out, newest first;
	// replicas behind one address share them. Empty: a key of this process.
	TokenKeys [][]byte
}

// consoleState is the handlers' console machinery.
type consoleState struct {
	cfg     ConsoleConfig
	probes  probeCache
	viewers viewers
	// watchers is who else has a console open, for the holder's notice.
	watchers watchers
	// links is the path of each desktop's open console, for its chip.
	links  links
	tokens *console.RDPTokens
	peers  *relay.PeerVerifier // checks peer links to this portal
}

func newConsoleState(cfg ConsoleConfig) *consoleState {
	if cfg.DirectTimeout <= 0 {
		cfg.DirectTimeout = defaultDirectTimeout
	}
	if cfg.PingEvery <= 0 {
		cfg.PingEvery = defaultPingEvery
	}
	if len(cfg.PeerSecret) == 0 {
		cfg.Peers = nil
	}
	return &consoleState{cfg: cfg, peers: relay.NewPeerVerifier(cfg.PeerSecret)}
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

// dialConsole connects to console p of ref by the first path that works and
// returns the path's name. Errors that no other path can mend (no such
// member, no such console, not running) end the search at once; when every
// path fails, the error names each.
func (h *Handler) dialConsole(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, string, error) {
	return h.dialConsoleFor(ctx, ref, p, false)
}

// dialConsoleFor is dialConsole for someone who watches alongside the
// holder (alongside true): a VNC or serial console is not opened through
// the further Paths then, since KubeVirt lets one viewer in at a time and a
// new one would disconnect the holder's.
func (h *Handler) dialConsoleFor(ctx context.Context, ref vdi.Ref, p vdi.Protocol, alongside bool) (net.Conn, string, error) {
	cfg := h.console.cfg
	begin := time.Now()
	dctx, cancel := context.WithTimeout(ctx, cfg.DirectTimeout)
	conn, err := h.desktops.Dial(dctx, ref, p)
	cancel()
	if err == nil {
		return conn, PathDirect, nil
	}
	if final(err) {
		return nil, "", err
	}
	fails := []string{"direct: " + rootCause(err)}
	paths := make([]ConsolePath, 0, len(cfg.Peers)+len(cfg.Paths))
	for _, base := range cfg.Peers {
		paths = append(paths, peerPath{base, cfg.PeerSecret})
	}
	hint := "Check that this portal or one of its peers (CORRAL_VDI_PEERS) can reach the desktop, then reconnect."
	if alongside && (p == vdi.ProtocolVNC || p == vdi.ProtocolSerial) && len(cfg.Paths) > 0 {
		fails = append(fails, "the API server: not tried, one viewer at a time")
		hint = "Watching through the API server would disconnect the desktop's user (KubeVirt lets one " + string(p) +
			" viewer in at a time). Let this portal or a peer reach the desktop's IP, or assign the desktop to yourself."
	} else {
		paths = append(paths, cfg.Paths...)
	}
	for _, path := range paths {
		c, perr := path.Dial(ctx, ref, p)
		if perr == nil {
			h.log.Info("console reached through a fallback path", "desktop", ref, "protocol", p, "path", path.Name(),
				"direct_err", err, "elapsed", time.Since(begin).Round(time.Millisecond))
			return c, path.Name(), nil
		}
		fails = append(fails, path.Name()+": "+rootCause(perr))
	}
	if len(paths) == 0 && len(fails) == 1 {
		return nil, "", err
	}
	h.log.Warn("no path reaches the console", "desktop", ref, "protocol", p, "tried", strings.Join(fails, "; "))
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

// rootCause is the innermost error's text, short enough for a message.
func rootCause(err error) string {
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
