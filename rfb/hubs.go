package rfb

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Hubs keeps one hub per desktop while the desktop has clients: the first
// client's Join connects it, the others share it, and it closes when the
// last leaves. The zero value is ready; Log, if set, hears why clients and
// hubs end.
type Hubs struct {
	Log *slog.Logger
	// H264, if set, is the program (gst-launch-1.0) each hub runs to encode
	// its screen once as H.264 for the clients that ask for encoding 50;
	// empty, they get the other encodings.
	H264 string

	mu sync.Mutex
	by map[string]*hubEntry
}

// hubEntry is one desktop's hub, connecting (ready open) or connected.
type hubEntry struct {
	ready   chan struct{}
	hub     *Hub
	path    string
	err     error
	clients int
}

// Dialer opens a desktop's console stream and names the path it took.
type Dialer func(ctx context.Context) (net.Conn, string, error)

// Join returns one client's connection to key's hub, dialing the desktop
// with dial when no hub runs for key, and the path the hub's connection
// took. Closing the connection leaves the hub. Control says whether the
// client's input reaches the desktop. A hub another caller was connecting
// (Warm, a client a moment before) that failed is dialed once more.
func (hs *Hubs) Join(ctx context.Context, key string, control bool, dial Dialer) (net.Conn, string, error) {
	var e *hubEntry
	for attempt := 0; ; attempt++ {
		var leader bool
		e, leader = hs.enter(key)
		if leader {
			hs.connect(ctx, e, dial)
		} else {
			select {
			case <-e.ready:
			case <-ctx.Done():
				hs.leave(key, e)
				return nil, "", ctx.Err()
			}
		}
		if e.err == nil {
			break
		}
		hs.leave(key, e)
		if leader || attempt > 0 {
			return nil, "", e.err
		}
	}
	server, client := net.Pipe()
	go func() {
		err := e.hub.Serve(context.Background(), server, control)
		if hs.Log != nil && err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, net.ErrClosed) && !isEOF(err) {
			hs.Log.Info("shared console client ended", "desktop", key, "err", err)
		}
		hs.leave(key, e)
	}()
	return &clientConn{Conn: client, hub: e.hub, server: server}, e.path, nil
}

// clientConn is a client's end of its hub: at the end of the stream it
// reads the reason the hub was closed for (Hub.CloseFor), if any, rather
// than io.EOF.
type clientConn struct {
	net.Conn
	hub    *Hub
	server net.Conn // the hub's end, which names the viewer (VideoTo)
}

// Read implements net.Conn.
func (c *clientConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		if why := c.hub.reason(); why != nil {
			return n, why
		}
	}
	return n, err
}

// NetConn returns the connection underneath: a net.Pipe, whose reads may
// time out harmlessly.
func (c *clientConn) NetConn() net.Conn { return c.Conn }

// Warm connects key's hub ahead of its first client, unless one runs or
// is connecting, and keeps it for hold: the console page's websocket,
// which follows a page load later, then finds the desktop's screen there
// instead of fetching it on its way. It does not wait.
func (hs *Hubs) Warm(key string, hold time.Duration, dial Dialer) {
	e, leader := hs.enter(key)
	if !leader { // it runs, or a client is connecting it
		hs.leave(key, e)
		return
	}
	go func() {
		// The connection outlives any request, as a client's does.
		hs.connect(context.Background(), e, dial)
		if e.err != nil {
			hs.leave(key, e)
			return
		}
		time.AfterFunc(hold, func() { hs.leave(key, e) })
	}()
}

// enter counts a client into key's entry, making a new one (and the
// caller its leader, who connects it) when none runs.
func (hs *Hubs) enter(key string) (e *hubEntry, leader bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.by == nil {
		hs.by = map[string]*hubEntry{}
	}
	e = hs.by[key]
	leader = e == nil || e.dead()
	if leader {
		e = &hubEntry{ready: make(chan struct{})}
		hs.by[key] = e
	}
	e.clients++
	return e, leader
}

// connect dials and shakes hands with e's desktop, then opens e.ready.
func (hs *Hubs) connect(ctx context.Context, e *hubEntry, dial Dialer) {
	conn, path, err := dial(ctx)
	if err == nil {
		e.hub, err = connect(conn, hs.H264, hs.Log)
	}
	e.path, e.err = path, err
	close(e.ready)
}

// dead reports whether e's hub has ended; hs.mu is held.
func (e *hubEntry) dead() bool {
	select {
	case <-e.ready:
		return e.err != nil || e.hub.Err() != nil
	default:
		return false
	}
}

// leave counts a client out of e, closing its hub after the last.
func (hs *Hubs) leave(key string, e *hubEntry) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	e.clients--
	if e.clients > 0 {
		return
	}
	if hs.by[key] == e {
		delete(hs.by, key)
	}
	if e.hub != nil {
		e.hub.Close()
	}
}

// Hub returns key's running hub, if any.
func (hs *Hubs) Hub(key string) (*Hub, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	e := hs.by[key]
	if e == nil || e.dead() {
		return nil, false
	}
	select {
	case <-e.ready:
		return e.hub, true
	default:
		return nil, false
	}
}
