package handlers

import (
	"context"
	"net"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/fanout"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/rtc"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// defaultPingEvery is how often an idle console websocket is pinged.
const defaultPingEvery = 20 * time.Second

// ConsoleConfig configures console connections.
type ConsoleConfig struct {
	// Peers are the base URLs of peer portals (http://host:port), tried in
	// order when the direct path fails; FindPeers names more, found (the
	// other replicas).
	Peers     []string
	FindPeers func(ctx context.Context) []string
	// PeerSecret signs peer links both ways; without it this portal
	// neither asks peers nor serves them.
	PeerSecret []byte
	// Paths are tried after the peers.
	Paths []console.Path
	// DirectTimeout bounds the direct connection; zero means 750ms.
	DirectTimeout time.Duration
	// PingEvery is how often console websockets are pinged; zero means 20s.
	PingEvery time.Duration
	// TokenKeys sign the RDP tokens /connect hands out, newest first;
	// replicas behind one address share them. Empty: a key of this process.
	TokenKeys [][]byte
	// Owners records which replica owns each desktop's screen; nil: this
	// portal is the only one (console.LocalOwners).
	Owners console.Owners
	// H264 is the program the screen hubs run to encode H.264 (rfb.Hubs);
	// empty: tiles only.
	H264 string
	// RTC, if set, answers VNC consoles' WebRTC offers (console_webrtc.go);
	// nil: their video stays on the websocket.
	RTC *rtc.Server
}

// consoleState is the handlers' console machinery.
type consoleState struct {
	cfg ConsoleConfig

	// sessions runs every console once upgraded and an agent's screen:
	// what ends them, who watches, each desktop's console path.
	sessions *console.Sessions
	tokens   *console.RDPTokens
	peers    *relay.PeerVerifier // checks peer links to this portal
	// dial opens console connections by the first path that works.
	dial *console.Console
	// hubs holds each desktop's one VNC connection while it has consoles
	// open: the holder's, invitees', watchers' and thumbnails, when this
	// replica owns the desktop's screen; screens joins clients to it, or
	// to the owner's over a screen link.
	hubs    rfb.Hubs
	screens *console.Screens
	// streams holds the holders' terminal and serial consoles, which
	// the users they invite join; shared records them cluster-wide and
	// joins invitees to them wherever they opened.
	streams fanout.Streams
	shared  *console.Streams
}

// screenWarmHold is how long a screen warmed for a console page waits for
// the page's websocket (the page's early socket gives up after 15 s too).
const screenWarmHold = 15 * time.Second

// warmScreen connects d's screen (its hub) as the holder's console page
// goes out, when the page will open VNC: the page's websocket, a page
// load later, finds the desktop's first screen waiting instead of
// dialing and fetching it on the way. Only by the direct path: through
// the API server it would take a KubeVirt VMI's one viewer slot, which
// the page's websocket may need on another replica.
func (cs *consoleState) warmScreen(id vdi.Identity, d vdi.Desktop, likely vdi.Protocol) {
	if likely != vdi.ProtocolVNC || d.Holder != id.Login || d.Power != vdi.PowerRunning {
		return
	}
	ref := d.Ref()
	cs.screens.Warm(ref, screenWarmHold, func(ctx context.Context) (net.Conn, string, error) {
		conn, err := cs.dial.DialDirect(ctx, ref, vdi.ProtocolVNC)
		return conn, console.PathDirect, err
	})
}

// screenDial opens ref's screen for its hub, by the first path that
// works, for as long as the hub runs (not the first client's request).
func (cs *consoleState) screenDial(ref vdi.Ref) rfb.Dialer {
	return func(ctx context.Context) (net.Conn, string, error) {
		return cs.dial.Dial(context.WithoutCancel(ctx), ref, vdi.ProtocolVNC)
	}
}

func newConsoleState(cfg ConsoleConfig) *consoleState {
	if cfg.PingEvery <= 0 {
		cfg.PingEvery = defaultPingEvery
	}
	if len(cfg.PeerSecret) == 0 {
		cfg.Peers, cfg.FindPeers = nil, nil
	}
	return &consoleState{cfg: cfg, peers: relay.NewPeerVerifier(cfg.PeerSecret)}
}
