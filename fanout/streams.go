package fanout

import (
	"net"
	"sync"
)

// Streams keeps the shared consoles of a portal by key (a desktop and a
// console kind): the holder's console opens one, invitees join the newest.
// The zero value is ready to use.
type Streams struct {
	mu   sync.Mutex
	m    map[string]shared
	live map[*Stream]struct{} // every stream not yet ended, the replaced ones too
}

// shared is a key's newest stream and how it reaches its console.
type shared struct {
	s    *Stream
	path string
}

// Open shares up, reached by path (the relay path, told to those who
// join), as key's newest console and returns its owner's end.
// With exclusive (a serial line, which takes one client) the stream it
// replaces ends, with its clients; otherwise that one lives on with the
// clients it has while its owner's end is open, and new ones join this
// one.
func (ss *Streams) Open(key string, up net.Conn, path string, exclusive bool) (*Conn, error) {
	s := New(up)
	ss.mu.Lock()
	if ss.m == nil {
		ss.m, ss.live = map[string]shared{}, map[*Stream]struct{}{}
	}
	old := ss.m[key].s
	ss.m[key] = shared{s, path}
	ss.live[s] = struct{}{}
	ss.mu.Unlock()
	if old != nil && exclusive {
		old.Close()
	}
	go func() {
		<-s.Done()
		ss.mu.Lock()
		if ss.m[key].s == s {
			delete(ss.m, key)
		}
		delete(ss.live, s)
		ss.mu.Unlock()
	}()
	return s.Join(true, true)
}

// Join adds a client to key's newest console and returns its end and the
// console's path, or false when none is open.
func (ss *Streams) Join(key string, control bool) (*Conn, string, bool) {
	ss.mu.Lock()
	sh := ss.m[key]
	ss.mu.Unlock()
	if sh.s == nil {
		return nil, "", false
	}
	c, err := sh.s.Join(control, false)
	return c, sh.path, err == nil
}

// Has reports whether a console is open under key, to Join.
func (ss *Streams) Has(key string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[key].s != nil
}

// CloseAll ends every console ss shares (the newest of each key and
// those they replaced), with their clients, which read why (Stream.CloseFor;
// nil: io.EOF): a replica that drains hands them off this way.
func (ss *Streams) CloseAll(why error) {
	ss.mu.Lock()
	all := make([]*Stream, 0, len(ss.live))
	for s := range ss.live {
		all = append(all, s)
	}
	ss.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.CloseFor(why) }) // each may wait for its console's far end
	}
	wg.Wait()
}
