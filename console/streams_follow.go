package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// followWait is how long an invitee's stream link that ended looks for
// the holder's console again (followConn) before the invitee's console
// ends too: long enough for the holder's page to reconnect to another
// replica (its first retry comes within a few seconds).
var followWait = 15 * time.Second

// followConn is an invitee's end of a stream link to the replica that
// shares the holder's console. When the link ends (that replica drains
// and hands its consoles off, or the holder opened the console anew on
// another replica) it joins the holder's console where the record names
// it next, for up to followWait, so the invitee's console goes on with no
// reconnect of its own; else it ends as the link did. Only its reader
// follows; a write while it does waits for the outcome.
type followConn struct {
	s       *Streams
	ref     vdi.Ref
	p       vdi.Protocol
	control bool

	mu        sync.Mutex
	cur       net.Conn
	version   string        // the record whose console cur reaches
	moved     chan struct{} // closed when cur is replaced or the follow gives up
	following bool          // the reader looks for the console: cur has ended
	closed    bool          // Close was called
	lost      bool          // the follow gave up: cur is the ended link
}

// follow returns link, an invitee's stream link to the console recorded
// as version, as a followConn.
func (s *Streams) follow(ref vdi.Ref, p vdi.Protocol, control bool, link net.Conn, version string) net.Conn {
	return &followConn{s: s, ref: ref, p: p, control: control, cur: link, version: version, moved: make(chan struct{})}
}

// current returns the link in use and the channel that says it changed.
func (f *followConn) current() (net.Conn, chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, f.moved
}

// Read implements net.Conn: it reads the holder's console, following it
// when its link ends, unless this replica has handed its consoles off
// (draining): then the invitee's console ends as the holder's does,
// saying that the console moves, and the page reconnects elsewhere.
func (f *followConn) Read(b []byte) (int, error) {
	for {
		c, moved := f.current()
		n, err := c.Read(b)
		if n > 0 || err == nil || isTimeout(err) {
			return n, err
		}
		if f.s.handedOff.Load() {
			f.giveUp(moved) // a writer waiting on the follow returns too
			return n, err
		}
		if !f.refollow(moved) {
			return n, err
		}
	}
}

// Write implements net.Conn: a write while the reader follows the
// console (or that fails as the link ends) waits for it and is written to
// the next link, never to the ended one, where it would be lost.
func (f *followConn) Write(b []byte) (int, error) {
	for {
		f.mu.Lock()
		c, moved, following, stop := f.cur, f.moved, f.following, f.closed || f.lost
		f.mu.Unlock()
		if stop {
			return 0, net.ErrClosed
		}
		if following {
			<-moved
			continue
		}
		n, err := c.Write(b)
		if err == nil || isTimeout(err) {
			return n, err
		}
		<-moved // the reader notices the end too: it follows or gives up
	}
}

// refollow looks for the holder's console anew after the link behind
// moved ended, and reports whether the invitee reads on from it.
func (f *followConn) refollow(moved chan struct{}) bool {
	f.mu.Lock()
	lost := f.lost
	f.following = !lost
	f.mu.Unlock()
	if lost {
		return false
	}
	key := StreamKey(f.ref, f.p)
	ctx, cancel := context.WithTimeout(context.Background(), followWait)
	defer cancel()
	f.s.log.Info("an invitee's link to the shared console ended; following the console", "console", key)
	warned := false // a holder that does not answer is said once a follow, not every poll
	for {
		f.mu.Lock()
		closed := f.closed
		f.mu.Unlock()
		if closed {
			return f.giveUp(moved)
		}
		c, version, err := f.find(ctx, key)
		if err != nil && !warned {
			warned = true
			f.s.log.Warn("the replica holding the shared console does not answer; the invitee waits for the console elsewhere", "console", key, "err", err)
		}
		if c != nil {
			f.mu.Lock()
			if f.closed {
				f.mu.Unlock()
				c.Close()
				return f.giveUp(moved)
			}
			f.cur.Close()
			f.cur, f.version, f.moved, f.following = c, version, make(chan struct{}), false
			f.mu.Unlock()
			close(moved)
			f.s.log.Info("an invitee follows the shared console", "console", key, "version", version)
			return true
		}
		if sleep(ctx, ownerPoll) != nil {
			f.s.log.Info("the shared console did not come back; the invitee's console ends", "console", key)
			return f.giveUp(moved)
		}
	}
}

// find joins the holder's console where its record names it now, if it
// is there (c is nil when it is not); err says why the replica its
// record names does not answer.
func (f *followConn) find(ctx context.Context, key string) (c net.Conn, version string, err error) {
	o, err := f.s.owners.Get(ctx, key)
	if err != nil || o.Version == "" || !o.Alive {
		return nil, "", nil
	}
	if o.Replica == f.s.owners.Self() {
		c, _, ok := f.s.streams.Join(f.ref.String()+"/"+string(f.p), f.control)
		if !ok {
			return nil, "", nil
		}
		return c, o.Version, nil
	}
	c, err = relay.DialPeerStream(ctx, o.URL, f.s.secret, string(f.p), screenRole(f.control), f.ref.Namespace, f.ref.Name)
	var no *relay.PeerRefusal
	switch {
	case err == nil:
		return c, o.Version, nil
	case errors.As(err, &no) && no.Status == http.StatusConflict, ctx.Err() != nil:
		return nil, "", nil // not there (yet), or the follow is over
	default:
		return nil, "", fmt.Errorf("%s: %w", o.Replica, err)
	}
}

// giveUp ends the follow: writers waiting on moved return.
func (f *followConn) giveUp(moved chan struct{}) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lost {
		f.lost = true
		close(moved)
	}
	return false
}

// isTimeout reports whether err is a deadline's: the link is still there.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Close implements net.Conn.
func (f *followConn) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return f.cur.Close()
}

// LocalAddr implements net.Conn.
func (f *followConn) LocalAddr() net.Addr { c, _ := f.current(); return c.LocalAddr() }

// RemoteAddr implements net.Conn.
func (f *followConn) RemoteAddr() net.Addr { c, _ := f.current(); return c.RemoteAddr() }

// SetDeadline implements net.Conn, on the link in use.
func (f *followConn) SetDeadline(t time.Time) error { c, _ := f.current(); return c.SetDeadline(t) }

// SetReadDeadline implements net.Conn, on the link in use.
func (f *followConn) SetReadDeadline(t time.Time) error {
	c, _ := f.current()
	return c.SetReadDeadline(t)
}

// SetWriteDeadline implements net.Conn, on the link in use.
func (f *followConn) SetWriteDeadline(t time.Time) error {
	c, _ := f.current()
	return c.SetWriteDeadline(t)
}
