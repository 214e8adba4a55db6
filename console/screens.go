package console

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// defaultOwnerWait bounds how long a client waits for an owner that does
// not answer (a replica killed, its heartbeat not yet run out) before its
// console is refused: a little over a heartbeat's life.
const defaultOwnerWait = 8 * time.Second

// ownerPoll is how often a waiting client reads the owner record again.
const ownerPoll = 250 * time.Millisecond

// ScreensConfig configures Screens.
type ScreensConfig struct {
	// Hubs holds this replica's hubs; required.
	Hubs *rfb.Hubs
	// Owners keeps the owner records; nil means a LocalOwners (one
	// replica).
	Owners Owners
	// PeerSecret signs screen links to other replicas.
	PeerSecret []byte
	// Wait bounds a client's wait for an owner that does not answer;
	// zero means 8s.
	Wait time.Duration
	// Log hears ownership changes and refused links; nil: slog.Default().
	Log *slog.Logger
}

// Screens joins clients to desktops' screens, cluster-wide: to this
// replica's hub of the desktop when this replica owns its screen (taking
// the screen by compare-and-swap when nobody alive owns it), else over a
// screen link to the owner's hub. Only an owner dials a desktop's screen.
type Screens struct {
	hubs   *rfb.Hubs
	owners Owners
	secret []byte
	wait   time.Duration
	log    *slog.Logger

	mu    sync.Mutex
	owned map[string]Owner      // the records of the screens this replica holds
	links map[string]servedLink // the screen links served, by nonce (screens_video.go)

	handedOff atomic.Bool // draining: this replica takes no screen any more
}

// NewScreens returns Screens for cfg.
func NewScreens(cfg ScreensConfig) *Screens {
	s := &Screens{hubs: cfg.Hubs, owners: cfg.Owners, secret: cfg.PeerSecret, wait: cfg.Wait, log: cfg.Log}
	if s.owners == nil {
		s.owners = new(LocalOwners)
	}
	if s.wait <= 0 {
		s.wait = defaultOwnerWait
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Join returns a client's connection to ref's screen (the hub's RFB
// server side) and the path the client takes: the owner's upstream path
// on the owner, PathPeer elsewhere. control says whether the client's
// input may reach the desktop; a screen link carries it to the owner,
// signed. dial opens the desktop's screen when this replica becomes its
// owner.
func (s *Screens) Join(ctx context.Context, ref vdi.Ref, control bool, dial rfb.Dialer) (net.Conn, string, error) {
	key := ref.String()
	if _, ok := s.hubs.Hub(key); ok { // this replica owns it
		conn, path, err := s.hubs.Join(ctx, key, control, s.own(key, nil, false, dial))
		if !errors.Is(err, ErrOwnerChanged) {
			return conn, path, err
		}
	}
	deadline := time.Now().Add(s.wait)
	for try := 0; ; try++ {
		if try > 0 && time.Now().After(deadline) {
			s.log.Warn("no owner of the screen could be joined or made", "desktop", key, "tries", try)
			return nil, "", &vdi.Error{Code: vdi.EUnavailable, Msg: "The screen of " + key + " is changing hands.",
				Hint: "Connect again in a moment."}
		}
		o, err := s.owners.Get(ctx, key)
		if err != nil {
			return nil, "", &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "Whose screen " + key + " is cannot be read now.",
				Hint: "The portal's replicas record it on the API server; connect again in a moment."}
		}
		if o.Version == "" || o.Replica == s.owners.Self() || !o.Alive {
			conn, path, err := s.hubs.Join(ctx, key, control, s.own(key, &o, false, dial))
			if errors.Is(err, ErrOwnerChanged) {
				s.log.Info("another replica took the screen first; joining it", "desktop", key)
				continue
			}
			return conn, path, err
		}
		conn, err := relay.DialPeerScreen(ctx, o.URL, s.secret, screenRole(control), ref.Namespace, ref.Name)
		if err == nil {
			return &linkedScreen{ScreenConn: conn, ctx: ctx, base: o.URL, secret: s.secret, ref: ref, owner: o.Replica, log: s.log}, PathPeer, nil
		}
		var no *relay.PeerRefusal
		switch {
		case errors.As(err, &no) && no.Status == http.StatusConflict:
			s.log.Info("the recorded owner says it no longer owns the screen; reading the record again", "desktop", key, "owner", o.Replica)
			if err := sleep(ctx, ownerPoll/5); err != nil {
				return nil, "", err
			}
		case errors.As(err, &no):
			s.log.Warn("the screen's owner refused the link", "desktop", key, "owner", o.Replica, "err", err)
			return nil, "", &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The replica holding " + key + "'s screen refused to share it.",
				Hint: "The portal's replicas need the same CORRAL_VDI_PEER_SECRET; ask an admin."}
		case time.Now().After(deadline):
			s.log.Warn("the screen's owner does not answer", "desktop", key, "owner", o.Replica, "url", o.URL, "err", err)
			return nil, "", &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The replica holding " + key + "'s screen does not answer.",
				Hint: "Connect again: once its heartbeat runs out, another replica takes the screen over."}
		default: // killed, its heartbeat not yet run out
			if err := sleep(ctx, ownerPoll); err != nil {
				return nil, "", err
			}
		}
	}
}

// Warm connects ref's screen ahead of its first client, when nobody alive
// owns it or this replica does (see rfb.Hubs.Warm). It does not wait.
func (s *Screens) Warm(ref vdi.Ref, hold time.Duration, dial rfb.Dialer) {
	key := ref.String()
	s.hubs.Warm(key, hold, s.own(key, nil, false, dial))
}

// ServeLink joins a client that another replica relays over a screen
// link to ref's hub, until ctx ends. Only the owner serves one: a replica
// that the record does not name refuses with ErrNotOwner, and never takes
// a screen or dials a desktop for a link. nonce, the link's signature's,
// names it for a video link (ServeVideo).
func (s *Screens) ServeLink(ctx context.Context, ref vdi.Ref, control bool, nonce string, dial rfb.Dialer) (net.Conn, error) {
	conn, _, err := s.hubs.Join(ctx, ref.String(), control, s.own(ref.String(), nil, true, dial))
	if err == nil {
		s.serveLinkVideo(ctx, ref, nonce, conn)
	}
	return conn, err
}

// own returns the dialer of key's hub on this replica: it takes the
// screen's record from prev (nil: the record read now) by
// compare-and-swap, then dials; the record is released when the hub's
// upstream closes. forLink: only if the record already names this
// replica (ErrNotOwner otherwise).
func (s *Screens) own(key string, prev *Owner, forLink bool, dial rfb.Dialer) rfb.Dialer {
	return func(ctx context.Context) (net.Conn, string, error) {
		self := s.owners.Self()
		if s.handedOff.Load() {
			return nil, "", ErrNotOwner // draining: the screen goes to another replica
		}
		var from Owner
		if prev != nil {
			from = *prev
		} else {
			cur, err := s.owners.Get(ctx, key)
			if err != nil {
				return nil, "", err
			}
			from = cur
		}
		switch {
		case forLink && (from.Version == "" || from.Replica != self):
			s.log.Warn("refused a screen link: this replica does not own the screen", "desktop", key, "owner", from.Replica)
			return nil, "", ErrNotOwner
		case from.Version != "" && from.Replica != self && from.Alive:
			return nil, "", ErrOwnerChanged
		}
		o, err := s.owners.Take(ctx, key, from)
		if err != nil {
			return nil, "", err
		}
		if from.Version != "" && from.Replica != self {
			s.log.Info("took over the screen of a replica that stopped", "desktop", key, "from", from.Replica)
		}
		conn, path, err := dial(ctx)
		if err != nil {
			s.release(key, o)
			return nil, "", err
		}
		s.mu.Lock()
		if s.owned == nil {
			s.owned = map[string]Owner{}
		}
		s.owned[key] = o
		s.mu.Unlock()
		return &ownedConn{Conn: conn, release: func() { s.release(key, o) }}, path, nil
	}
}

// Recheck reads the record of every screen this replica holds and closes
// the hub of each that another replica has taken meanwhile (this one's
// heartbeat ran out: the apiserver away, the process stalled), so that
// its clients reconnect to the new owner. Call it when the heartbeat is
// renewed after it ran out.
func (s *Screens) Recheck(ctx context.Context) {
	s.mu.Lock()
	owned := make(map[string]Owner, len(s.owned))
	for k, o := range s.owned {
		owned[k] = o
	}
	s.mu.Unlock()
	for key, o := range owned {
		cur, err := s.owners.Get(ctx, key)
		if err != nil || cur.Version == o.Version || cur.Replica == s.owners.Self() {
			continue // still this replica's (or its newer record, whose hub replaced that one)
		}
		s.log.Warn("another replica took this replica's screen while its heartbeat had run out; closing it here", "desktop", key, "owner", cur.Replica)
		if h, ok := s.hubs.Hub(key); ok {
			h.Close()
		}
	}
}

// ScreenMoves is what a draining replica's hand-over tells the clients of
// the screens it held, its own and those relayed to it from other
// replicas (relay.HandedOver): their pages say it and reconnect.
const ScreenMoves = "the portal server holding this desktop's screen is shutting down; the screen moves to another one"

// HandOff gives up every screen this replica holds and takes no more: a
// draining replica calls it as the drain begins, so that the other
// replicas take its screens over at once rather than when it exits. Each
// hub closes and its record goes; the clients relayed to it and its own
// reconnect (the console pages do), through replicas that are not
// draining, one of which takes the screen by compare-and-swap; they are
// told why (ScreenMoves). A screen link that reaches this replica
// afterwards is refused (409).
func (s *Screens) HandOff() {
	s.handedOff.Store(true)
	s.mu.Lock()
	keys := make([]string, 0, len(s.owned))
	for k := range s.owned {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for _, key := range keys {
		if h, ok := s.hubs.Hub(key); ok {
			s.log.Info("draining: handing the screen over to another replica", "desktop", key)
			h.CloseFor(relay.HandedOver(ScreenMoves))
		}
	}
}

// release gives key's screen up (releaseOwner).
func (s *Screens) release(key string, o Owner) {
	s.mu.Lock()
	if s.owned[key] == o {
		delete(s.owned, key)
	}
	s.mu.Unlock()
	releaseOwner(s.owners, s.log, key, o)
}

// ownedConn is an owner's upstream connection: closing it gives the
// screen up.
type ownedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *ownedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Resize passes a terminal's new size on to the console it owns (a serial
// line has no size to take: nothing then).
func (c *ownedConn) Resize(cols, rows uint16) error {
	if rz, ok := c.Conn.(relay.Resizer); ok {
		return rz.Resize(cols, rows)
	}
	return nil
}

// BeforeKey shows a key to the desktop connection it owns when that
// watches keys (rfb.KeyWatcher: a local desktop's Xvnc keymap).
func (c *ownedConn) BeforeKey(keysym uint32, down bool) {
	if w, ok := c.Conn.(rfb.KeyWatcher); ok {
		w.BeforeKey(keysym, down)
	}
}

// screenRole is a screen link's role for a client with or without control.
func screenRole(control bool) string {
	if control {
		return relay.ScreenControl
	}
	return relay.ScreenView
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
