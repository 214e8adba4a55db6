package connid

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Conn is an accepted connection with the Verdict on its peer.
type Conn struct {
	net.Conn
	Verdict Verdict
}

// Listener classifies every connection its inner listener accepts, each
// in a goroutine of its own, so that lookups run side by side and never
// in http.Server's accept loop; Accept returns them as *Conn, classified,
// in the order they were accepted (a client's connection over a cap is
// the one it opened last).
type Listener struct {
	net.Listener
	classify func(net.Conn) Verdict

	queue chan *pending // accepted, in order; bounds the lookups in flight
	done  chan struct{}
	once  sync.Once
}

// pending is an accepted connection (or Accept error) being classified.
type pending struct {
	conn  *Conn
	err   error
	ready chan struct{} // closed once conn.Verdict is set
}

// maxPending bounds the connections accepted but not yet handed on;
// beyond it the kernel's backlog holds them.
const maxPending = 256

// NewListener starts classifying what ln accepts with c.Classify.
func NewListener(ln net.Listener, c *Classifier) *Listener {
	l := &Listener{Listener: ln, classify: c.Classify, queue: make(chan *pending, maxPending), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		p := &pending{err: err, ready: make(chan struct{})}
		if err == nil {
			p.conn = &Conn{Conn: c}
			go func() {
				p.conn.Verdict = l.classify(c)
				close(p.ready)
			}()
		} else {
			close(p.ready)
		}
		select {
		case <-l.done:
		default:
			select {
			case l.queue <- p:
			case <-l.done:
			}
		}
		select {
		case <-l.done:
			if c != nil {
				c.Close()
			}
			return
		default:
		}
		switch {
		case err == nil:
			backoff = 0
		case errors.Is(err, net.ErrClosed):
			return
		default:
			// Out of file descriptors and the like: wait, as
			// http.Server does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
		}
	}
}

// Accept implements net.Listener: the next connection, once classified.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case p := <-l.queue:
		<-p.ready
		if p.err != nil {
			return nil, p.err
		}
		return p.conn, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; connections accepted but not yet handed
// on are closed.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		go func() { // the accept loop has stopped queueing, or will
			for {
				select {
				case p := <-l.queue:
					<-p.ready
					if p.conn != nil {
						p.conn.Close()
					}
				default:
					return
				}
			}
		}()
	})
	return l.Listener.Close()
}

// VerdictOf returns the Verdict of c, a connection a Listener accepted
// (possibly wrapped by a type with an Unwrap method), and whether it has
// one.
func VerdictOf(c net.Conn) (Verdict, bool) {
	for c != nil {
		if cc, ok := c.(*Conn); ok {
			return cc.Verdict, true
		}
		u, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	return Verdict{}, false
}
