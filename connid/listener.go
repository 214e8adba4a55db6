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
// in a goroutine of its own, so that a slow lookup never holds up the
// accept loop; Accept returns them as *Conn, classified.
type Listener struct {
	net.Listener
	classify func(net.Conn) Verdict

	ready chan *Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

// NewListener starts classifying what ln accepts with c.Classify.
func NewListener(ln net.Listener, c *Classifier) *Listener {
	l := &Listener{Listener: ln, classify: c.Classify, ready: make(chan *Conn), errs: make(chan error), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as
			// http.Server does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		go func() {
			cc := &Conn{Conn: c, Verdict: l.classify(c)}
			select {
			case l.ready <- cc:
			case <-l.done:
				c.Close()
			}
		}()
	}
}

// Accept implements net.Listener: the next classified connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; connections still being classified are
// closed.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
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
