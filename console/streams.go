package console

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/fanout"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Streams shares holders' terminal and serial consoles with the users
// they invite, cluster-wide: the replica where the holder opens one
// records itself as its holder (Owners, key StreamKey) and keeps it in
// its fanout.Streams; an invitee on another replica joins it over a
// signed stream link (relay.DialPeerStream) carrying their role. The
// holder's newest console is the one shared, wherever it opened.
type Streams struct {
	streams *fanout.Streams
	owners  Owners
	secret  []byte
	log     *slog.Logger
	lines   lines // the serial lines this replica holds, by their records

	handedOff atomic.Bool // draining: this replica shares no console any more
}

// NewStreams returns Streams over streams, recording holders in owners
// (nil: this portal alone) and signing links with secret.
func NewStreams(streams *fanout.Streams, owners Owners, secret []byte, log *slog.Logger) *Streams {
	if owners == nil {
		owners = new(LocalOwners)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Streams{streams: streams, owners: owners, secret: secret, log: log}
}

// StreamKey is the owner record's key of console p of ref.
func StreamKey(ref vdi.Ref, p vdi.Protocol) string { return string(p) + ":" + ref.String() }

// handOverWait bounds how long the holder's new serial console waits
// for their older one, on any replica, to let go of the line before it
// dials (Open): the older one ends as soon as its replica sees the
// takeover on the claim, well within a second or two.
var handOverWait = 10 * time.Second

// staleGrace is how long a record its live replica no longer uses is
// left to that replica's own release before a new console takes it over
// (takeFree): a release that works is the usual end, and leaves the line's
// last client time to be gone at the desktop.
const staleGrace = time.Second

// Open dials the holder's console p of ref (dial) and shares it as its
// newest, and returns the holder's end and the path it took. The record
// names this replica until the connection closes. An exclusive console
// (a serial line, which takes one client: on KubeVirt a second one kicks
// the first at virt-handler) is recorded before it is dialed, once no
// live replica holds it: the holder's older one, wherever it runs, has
// ended (taken over, Sessions.TakeOver) and let the line go, so that the
// desktop never has two clients of it, not even for a moment. If it does
// not within handOverWait, Open refuses and dials nothing. Any other
// console is recorded once dialed, over any record: the holder's newest
// wins.
func (s *Streams) Open(ctx context.Context, ref vdi.Ref, p vdi.Protocol, dial func(context.Context) (net.Conn, string, error), exclusive bool) (net.Conn, string, error) {
	if s.handedOff.Load() {
		return nil, "", ErrNotOwner // draining: the holder's page opens it on another replica
	}
	var o Owner
	if exclusive {
		var err error
		if o, err = s.takeFree(ctx, ref, p, false); err != nil {
			return nil, "", err
		}
	}
	return s.open(ctx, ref, p, dial, exclusive, o)
}

// OpenOrWatch opens an admin's own serial console p of ref, a desktop
// nobody holds, as Open does, or, while another admin's own holds the
// line (on any replica), joins that one view only (watching true): a
// line takes one client, and the second admin watches the first's as
// screens are shared, rather than waiting for it to let go.
func (s *Streams) OpenOrWatch(ctx context.Context, ref vdi.Ref, p vdi.Protocol, dial func(context.Context) (net.Conn, string, error)) (_ net.Conn, path string, watching bool, _ error) {
	if s.handedOff.Load() {
		return nil, "", false, ErrNotOwner
	}
	wait, cancel := context.WithTimeout(ctx, handOverWait)
	defer cancel()
	for {
		c, path, ok, err := s.Join(ctx, ref, p, false)
		if err != nil || ok {
			return c, path, ok, err
		}
		// None to join: the line is free, or its console still opening
		// or closing (then join it, or take the line, in a moment).
		o, err := s.takeFree(ctx, ref, p, true)
		if errors.Is(err, errLineHeld) {
			if sleep(wait, ownerPoll) == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil, "", false, context.Cause(ctx)
			}
			s.log.Warn("an admin's serial console found the line held by a console it could not join", "console", StreamKey(ref, p))
			return nil, "", false, vdi.Errorf(vdi.EConflict, "Connect again in a moment.",
				"The %s console of %s is held by another console, which could not be joined: it takes one client at a time.", p, ref)
		}
		if err != nil {
			return nil, "", false, err
		}
		c, path, err = s.open(ctx, ref, p, dial, true, o)
		return c, path, false, err
	}
}

// errLineHeld is takeFree's answer, watching, while a console of a live
// replica holds the line.
var errLineHeld = errors.New("console: the line is held")

// open dials console p of ref and shares it as Open says, recorded under
// o (exclusive: taken by takeFree) or, for any other, once dialed.
func (s *Streams) open(ctx context.Context, ref vdi.Ref, p vdi.Protocol, dial func(context.Context) (net.Conn, string, error), exclusive bool, o Owner) (net.Conn, string, error) {
	key := StreamKey(ref, p)
	up, path, err := dial(ctx)
	if err != nil {
		if o.Version != "" {
			s.lines.letGo(key, o.Version)
			releaseOwner(s.owners, s.log, key, o)
		}
		return nil, "", err
	}
	if !exclusive {
		done := s.lines.write(key) // a replica asking (Shared) is told it shares it
		o = s.takeNewest(ctx, key)
		done(o, o.Version != "")
	}
	if o.Version == "" {
		s.log.Warn("the shared console is not recorded: invitees on other replicas will not find it", "console", key)
	} else {
		up = &ownedConn{Conn: up, release: func() {
			s.lines.letGo(key, o.Version) // before the write, which may fail (inUse)
			releaseOwner(s.owners, s.log, key, o)
		}}
	}
	c, err := s.streams.Open(ref.String()+"/"+string(p), up, path, exclusive)
	if err != nil {
		return nil, "", err
	}
	return c, path, nil
}

// takeNewest records this replica as key's holder over any record, by
// compare-and-swap; a zero Owner when it could not.
func (s *Streams) takeNewest(ctx context.Context, key string) Owner {
	var o Owner
	for range 3 {
		cur, err := s.owners.Get(ctx, key)
		if err != nil {
			break
		}
		if o, err = s.owners.Take(ctx, key, cur); !errors.Is(err, ErrOwnerChanged) {
			break
		}
	}
	return o
}

// takeFree records this replica as the holder of console p of ref once
// no live replica holds it (none recorded, its replica dead, or alive
// and using the record no more: its release failed), waiting up to
// handOverWait for the one that does to let go; the refusal says what to
// do. Watching, it answers errLineHeld at once while one does.
func (s *Streams) takeFree(ctx context.Context, ref vdi.Ref, p vdi.Protocol, watching bool) (Owner, error) {
	key := StreamKey(ref, p)
	wait, cancel := context.WithTimeout(ctx, handOverWait)
	defer cancel()
	var stale string // the record version its replica said it no longer uses,
	var staleAt time.Time
	for {
		cur, err := s.owners.Get(wait, key)
		switch {
		case err != nil || cur.Version == "" || !cur.Alive:
		case s.inUse(wait, ref, p, cur):
			if watching {
				return Owner{}, errLineHeld
			}
		default:
			if stale != cur.Version {
				stale, staleAt = cur.Version, time.Now()
			}
			if time.Since(staleAt) >= staleGrace {
				s.log.Warn("the console's record names a replica that no longer holds it (its release failed): taken over", "console", key, "holder", cur.Replica, "version", cur.Version)
				cur.Alive = false
			}
		}
		if err == nil && (cur.Version == "" || !cur.Alive) {
			done := s.lines.write(key)
			o, terr := s.owners.Take(wait, key, cur)
			done(o, terr == nil)
			if terr == nil {
				return o, nil
			}
			if !errors.Is(terr, ErrOwnerChanged) {
				err = terr
			}
		}
		if sleep(wait, ownerPoll) == nil {
			continue
		}
		if ctx.Err() != nil {
			return Owner{}, context.Cause(ctx) // taken over itself meanwhile, or its client left
		}
		if err != nil {
			return Owner{}, &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The record of who holds the " + string(p) + " console of " + ref.String() + " cannot be read.",
				Hint: "Connect again in a moment."}
		}
		s.log.Warn("the holder's older console did not let go of the line; the new one is refused", "console", key, "holder", cur.Replica)
		return Owner{}, vdi.Errorf(vdi.EConflict, "Close it there, then connect again.",
			"The %s console of %s is still open in another tab or window, on portal server %s, and did not let go of it: it takes one client at a time.", p, ref, cur.Replica)
	}
}

// Join adds an invitee to the holder's console p of ref, typing only with
// control: on this replica, or over a stream link to the replica that
// holds it, which follows the holder's console to another replica
// (followConn). ok is false when the holder has none open.
func (s *Streams) Join(ctx context.Context, ref vdi.Ref, p vdi.Protocol, control bool) (conn net.Conn, path string, ok bool, err error) {
	if c, path, ok := s.streams.Join(ref.String()+"/"+string(p), control); ok {
		return c, path, true, nil
	}
	o, err := s.owners.Get(ctx, StreamKey(ref, p))
	if err != nil || o.Version == "" || o.Replica == s.owners.Self() || !o.Alive {
		return nil, "", false, err
	}
	c, err := relay.DialPeerStream(ctx, o.URL, s.secret, string(p), screenRole(control), ref.Namespace, ref.Name)
	var no *relay.PeerRefusal
	if errors.As(err, &no) && no.Status == http.StatusConflict {
		return nil, "", false, nil
	} else if err != nil {
		s.log.Warn("the replica holding the shared console does not answer", "desktop", ref, "protocol", p, "holder", o.Replica, "err", err)
		return nil, "", false, &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The replica holding the " + string(p) + " console of " + ref.String() + " does not answer.",
			Hint: "Open the link again in a moment."}
	}
	return s.follow(ref, p, control, c, o.Version), PathPeer, true, nil
}

// Shared reports whether the holder's console p of ref is open to Join:
// on this replica, or on the live replica its record names, which says
// it shares it under that record (one that does not answer is taken to).
// It joins nothing: a page asks before it dials.
func (s *Streams) Shared(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (bool, error) {
	if s.streams.Has(ref.String() + "/" + string(p)) {
		return true, nil
	}
	o, err := s.owners.Get(ctx, StreamKey(ref, p))
	if err != nil {
		return false, err
	}
	return o.Version != "" && o.Replica != s.owners.Self() && o.Alive && s.inUse(ctx, ref, p, o), nil
}

// ServeLink joins a client another replica relays over a stream link to
// the console this replica shares, or ErrNotOwner when it shares none.
func (s *Streams) ServeLink(ref vdi.Ref, p vdi.Protocol, control bool) (net.Conn, error) {
	if s.handedOff.Load() {
		return nil, ErrNotOwner
	}
	c, _, ok := s.streams.Join(ref.String()+"/"+string(p), control)
	if !ok {
		return nil, ErrNotOwner
	}
	return c, nil
}

// ConsoleMoves is what a draining replica's hand-over tells the clients
// of the terminal and serial consoles it shares (relay.HandedOver): the
// holder's page says it and reconnects; an invitee's relayed from another
// replica follows the console instead (followConn).
const ConsoleMoves = "the portal server holding this console is shutting down; the console moves to another one"

// HandOff ends every console this replica shares and shares no more: a
// draining replica calls it as the drain begins (as Screens.HandOff), so
// that it does not wait for the holders' consoles to end. Each stream
// closes with its clients here and its record goes; the holder's page
// opens the console again on a replica that is not draining, and the
// invitees relayed from other replicas follow it there (followConn). A
// stream link that reaches this replica afterwards is refused (409).
func (s *Streams) HandOff() {
	s.handedOff.Store(true)
	s.log.Info("draining: handing the shared consoles over to other replicas")
	s.streams.CloseAll(relay.HandedOver(ConsoleMoves))
}
