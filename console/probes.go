package console

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Probes: /connect answers from what the claim already knows; the console
// it opens is probed on the way (an RDP server must answer an X.224
// request, a serial console's sign-in is read), and results are cached
// per claim for probeTTL.

const (
	// probeTimeout bounds one probe of a desktop's RDP server: the direct
	// path's timeout and a fallback path (a peer, the apiserver) after it.
	probeTimeout = 3 * time.Second
	// probeTTL is how long a probe's result is reused, so that a click
	// (and the reconnects after it) does not wait on a slow server.
	probeTTL = 15 * time.Second
	// probeLater is how long after a page opened another console the
	// consoles it lists beside it are probed: not at once, as the one it
	// opens needs the machine for its first screen (freerdp-shadow spent
	// 40–80 ms of CPU answering a probe; on 2 cores the first-pixel bench
	// was 20–40 ms slower with it under way).
	probeLater = 5 * time.Second
)

// ProbeResult is what a probe of one console of one member found.
type ProbeResult struct {
	// OK reports whether the console answered (for RDP: an X.224 reply).
	OK bool
	// User and Password are the sign-in, when the backend knows it.
	User, Password string
	// At is when the probe ended.
	At time.Time
}

// signIn is implemented by connections to RDP servers whose sign-in the
// backend knows (local desktops); for others the user types it.
type signIn interface {
	Credentials() (user, password string)
}

// probeKey names one console of one member under one claim: a new claim
// (an ephemeral member recreated, with a fresh sign-in) is probed afresh.
// The claim is its time in microseconds, the precision a Lease keeps, so
// the desktop a claim returns and the one read back later name the same
// key (a time.Time also compares its monotonic reading and location).
type probeKey struct {
	ref     vdi.Ref
	p       vdi.Protocol
	claimed int64
}

// probeCache remembers probe results for probeTTL, and the probes under
// way so that a second asker waits for the first one's answer instead of
// probing again.
type probeCache struct {
	mu       sync.Mutex
	m        map[probeKey]ProbeResult
	inflight map[probeKey]*probeCall
	later    map[probeKey]bool // probes waiting for probeLater
}

// probeCall is a probe under way; done closes when res is set. learned
// says whether res says something of the desktop (the prober's caller did
// not go away mid-probe).
type probeCall struct {
	done    chan struct{}
	res     ProbeResult
	learned bool
}

// begin returns the probe of k under way and false, or a new one and true
// when the caller is to run it (and then call end).
func (c *probeCache) begin(k probeKey) (*probeCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call, ok := c.inflight[k]; ok {
		return call, false
	}
	if c.inflight == nil {
		c.inflight = map[probeKey]*probeCall{}
	}
	call := &probeCall{done: make(chan struct{})}
	c.inflight[k] = call
	return call, true
}

// schedule reports whether k is to be probed later, false when it
// already is.
func (c *probeCache) schedule(k probeKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.later[k] {
		return false
	}
	if c.later == nil {
		c.later = map[probeKey]bool{}
	}
	c.later[k] = true
	return true
}

// due notes that k's probe scheduled for later is running.
func (c *probeCache) due(k probeKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.later, k)
}

// end publishes a probe's result to those waiting on it.
func (c *probeCache) end(k probeKey, call *probeCall, res ProbeResult, learned bool) {
	c.mu.Lock()
	delete(c.inflight, k)
	c.mu.Unlock()
	call.res, call.learned = res, learned
	close(call.done)
}

func (c *probeCache) get(k probeKey, now time.Time) (ProbeResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	if !ok || now.Sub(r.At) > probeTTL {
		return ProbeResult{}, false
	}
	return r, true
}

// forget drops what is known of ref's consoles: it was started or stopped,
// and its sign-in may have changed with it.
func (c *probeCache) forget(ref vdi.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.m {
		if key.ref == ref {
			delete(c.m, key)
		}
	}
}

func (c *probeCache) put(k probeKey, r ProbeResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[probeKey]ProbeResult{}
	}
	for key, old := range c.m { // keep the map small: drop what expired
		if r.At.Sub(old.At) > probeTTL {
			delete(c.m, key)
		}
	}
	c.m[k] = r
}

// Forget drops what probes found of ref's consoles: it was started or
// stopped, and its sign-in may have changed with it.
func (c *Console) Forget(ref vdi.Ref) { c.probes.forget(ref) }

// ProbeKnown returns what the last probe of console p of d found, and
// false when none has answered yet: one is then started probeLater from
// now, for next time, once the console the page opens has its screen.
func (c *Console) ProbeKnown(d vdi.Desktop, p vdi.Protocol) (ProbeResult, bool) {
	key := probeKey{d.Ref(), p, d.ClaimedAt.UnixMicro()}
	if res, ok := c.probes.get(key, time.Now()); ok {
		return res, true
	}
	if c.probes.schedule(key) {
		c.after(probeLater, func() {
			c.probes.due(key)
			c.Probe(context.Background(), d, p)
		})
	}
	return ProbeResult{}, false
}

// Probe connects to console p of d, checks that an RDP server answers an
// X.224 request (for RDP), and notes the sign-in the backend knows. Results
// are cached for probeTTL.
//
// RDP is probed by the path chain its consoles take (direct, peers, then
// e.g. the apiserver's port forward), so that a server only a fallback
// reaches is still offered. Other consoles are dialled directly, only for
// the sign-in the backend knows: a fallback would open the guest's one
// serial console just to close it again.
func (c *Console) Probe(ctx context.Context, d vdi.Desktop, p vdi.Protocol) ProbeResult {
	ref := d.Ref()
	key := probeKey{ref, p, d.ClaimedAt.UnixMicro()}
	for {
		if res, ok := c.probes.get(key, time.Now()); ok {
			return res
		}
		call, mine := c.probes.begin(key)
		if mine {
			res, learned := c.runProbe(ctx, d, p)
			c.probes.end(key, call, res, learned)
			return res
		}
		select {
		case <-call.done:
			if call.learned {
				return call.res
			}
			// Its caller went away mid-probe: probe again.
		case <-ctx.Done():
			return ProbeResult{}
		}
	}
}

// ProbeAhead probes d's RDP server as soon as d is claimed, in the
// background, when RDP is the console its page opens (the first of
// d.Ranked: the claim's redirect names none), so that the console page's
// /connect (which follows the redirect by a few milliseconds) finds the
// answer ready or under way instead of waiting on a probe of its own.
// Where the page opens another console, RDP is probed only later
// (ProbeKnown), out of the way of that console's first screen.
func (c *Console) ProbeAhead(d vdi.Desktop) {
	if r := d.Ranked(); d.Power != vdi.PowerRunning || len(r) == 0 || r[0] != vdi.ProtocolRDP {
		return
	}
	go c.Probe(context.Background(), d, vdi.ProtocolRDP)
}

// runProbe is one probe of console p of d; learned is false when ctx ended
// mid-probe, so the result says nothing of the desktop and is not cached.
func (c *Console) runProbe(ctx context.Context, d vdi.Desktop, p vdi.Protocol) (_ ProbeResult, learned bool) {
	ref := d.Ref()
	key := probeKey{ref, p, d.ClaimedAt.UnixMicro()}
	begin := time.Now()
	res := ProbeResult{}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	path := PathDirect
	if p == vdi.ProtocolRDP {
		conn, path, err = c.Dial(ctx, ref, p)
	} else {
		conn, err = c.direct.Dial(ctx, ref, p)
	}
	if err == nil {
		if sc, ok := conn.(signIn); ok {
			res.User, res.Password = sc.Credentials()
		}
		if p == vdi.ProtocolRDP {
			err = relay.ProbeRDP(ctx, conn)
		}
		conn.Close()
	}
	res.OK = err == nil
	if caller.Err() != nil {
		return res, false // the caller went away mid-probe: nothing learned about the desktop
	}
	switch {
	case err != nil && p == vdi.ProtocolRDP:
		c.log.Warn("console probe failed; offering the others", "desktop", ref, "protocol", p, "err", err)
	case err != nil:
		c.log.Debug("no sign-in from the backend for this console", "desktop", ref, "protocol", p, "err", err)
	}
	c.log.Debug("console probed", "desktop", ref, "protocol", p, "ok", res.OK, "path", path, "elapsed", time.Since(begin).Round(time.Millisecond))
	res.At = time.Now()
	c.probes.put(key, res)
	return res, true
}
