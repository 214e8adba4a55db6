// Package fanout shares one byte-stream console (a terminal's pty, a
// serial line) among several clients, as package rfb shares a screen:
// every client reads what the console writes, starting with the last of
// it (so a viewer who joins sees the screen's recent lines), each at its
// own pace; only clients with control type into it, and only its owner
// (the holder's console that opened it) resizes it.
package fanout

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
)

// Backlog is how much of the console's latest output a joining client is
// sent first: a few screens of a terminal.
const Backlog = 64 << 10

// maxBehind is how far a client may fall behind the console before it is
// dropped (its console closes; it reconnects to the present). The console
// and the other clients never wait for it.
const maxBehind = 4 << 20

// Resizer is a console that takes a new terminal size (a pty).
type Resizer interface {
	Resize(cols, rows uint16) error
}

// Stream is one console shared by its clients. It ends when the console
// ends, when Close is called, or when its owner (the holder's console
// that opened it) or its last client leaves: an invitee never keeps a
// console the holder has closed, typing into it unseen, nor holds it open
// beside the one the holder opens next.
type Stream struct {
	up   net.Conn
	once sync.Once
	done chan struct{}

	mu      sync.Mutex
	backlog []byte
	clients map[*client]struct{}
	joined  bool  // a client ever joined: the last one (or the owner) leaving ends the stream
	why     error // the reason CloseFor gave, which the clients read
}

// New starts sharing up, which the stream closes when it ends.
func New(up net.Conn) *Stream {
	s := &Stream{up: up, done: make(chan struct{}), clients: map[*client]struct{}{}}
	go s.read()
	return s
}

// Done is closed when the stream has ended.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Close ends the stream and every client's connection.
func (s *Stream) Close() {
	s.CloseFor(nil)
}

// CloseFor ends the stream as Close does, for a reason its clients are
// told: their connections read why where they would read io.EOF, so that
// whoever relays one can say why the console went (a draining replica
// hands its consoles over to another). The clients' connections close
// first: closing the console may wait for its far end to answer.
func (s *Stream) CloseFor(why error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.why = why // before any client's end closes
		close(s.done)
		for c := range s.clients {
			c.conn.Close()
		}
		s.mu.Unlock()
		s.up.Close()
	})
}

// readBuffer is the stream's read buffer, held for the console's life: a
// terminal's output comes a pty read at a time (at most 4 KiB on Linux),
// and a larger buffer was most of an idle shared terminal's memory.
const readBuffer = 4 << 10

// read passes the console's output to every client.
func (s *Stream) read() {
	defer s.Close()
	buf := make([]byte, readBuffer)
	for {
		n, err := s.up.Read(buf)
		if n > 0 {
			s.broadcast(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *Stream) broadcast(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backlog = append(s.backlog, p...)
	if over := len(s.backlog) - Backlog; over > 0 {
		s.backlog = append(s.backlog[:0], s.backlog[over:]...)
	}
	for c := range s.clients {
		c.push(p)
	}
}

// Join adds a client and returns its end of the console: it reads the
// backlog, then the console's output; what it writes reaches the console
// only with control, and its Resize only when it is the owner. Closing it
// leaves the stream.
func (s *Stream) Join(control, owner bool) (*Conn, error) {
	a, b := net.Pipe()
	c := &client{s: s, conn: a, control: control || owner, owner: owner, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil, io.EOF
	default:
	}
	s.joined = true
	s.clients[c] = struct{}{}
	if i := bytes.IndexByte(s.backlog, '\n'); i >= 0 && len(s.backlog) == Backlog {
		c.push(s.backlog[i+1:]) // from a line's start
	} else if len(s.backlog) > 0 {
		c.push(s.backlog)
	}
	s.mu.Unlock()
	go c.write()
	go c.read()
	return &Conn{Conn: b, s: s, owner: owner}, nil
}

// leave removes c; the owner or the last client leaving ends the stream.
func (s *Stream) leave(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	last := c.owner || len(s.clients) == 0 && s.joined
	s.mu.Unlock()
	if last {
		s.Close()
	}
}

// Conn is a client's end of a shared console.
type Conn struct {
	net.Conn
	s     *Stream
	owner bool
}

// Read implements net.Conn: at the end of the console it reads the
// reason the stream was closed for (Stream.CloseFor), if any, rather than
// io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.s.mu.Lock()
		why := c.s.why
		c.s.mu.Unlock()
		if why != nil {
			return n, why
		}
	}
	return n, err
}

// Resize resizes the console when c is its owner and it is a Resizer; a
// viewer's window size never changes the holder's terminal.
func (c *Conn) Resize(cols, rows uint16) error {
	if rz, ok := c.s.up.(Resizer); ok && c.owner {
		return rz.Resize(cols, rows)
	}
	return nil
}

// client is one joined connection, served by two goroutines.
type client struct {
	s       *Stream
	conn    net.Conn
	control bool
	owner   bool
	wake    chan struct{}

	// Guarded by s.mu.
	queue  [][]byte
	queued int
	behind bool
}

// push queues p for the client; s.mu is held.
func (c *client) push(p []byte) {
	if c.behind {
		return
	}
	if c.queued+len(p) > maxBehind {
		c.behind = true
		c.conn.Close()
		return
	}
	c.queue = append(c.queue, bytes.Clone(p))
	c.queued += len(p)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write sends the client its queue until its connection or the stream ends.
func (c *client) write() {
	defer c.conn.Close()
	for {
		select {
		case <-c.wake:
		case <-c.s.done:
			return
		}
		c.s.mu.Lock()
		q := c.queue
		c.queue, c.queued = nil, 0
		c.s.mu.Unlock()
		for _, p := range q {
			if _, err := c.conn.Write(p); err != nil {
				return
			}
		}
	}
}

// read passes what the client types to the console when it has control,
// and drops it otherwise; it leaves the stream when the client goes.
func (c *client) read() {
	defer c.s.leave(c)
	buf := make([]byte, 4<<10)
	for {
		n, err := c.conn.Read(buf)
		if n > 0 && c.control {
			if _, werr := c.s.up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
