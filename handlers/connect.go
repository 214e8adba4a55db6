package handlers

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// One-click connect: /connect answers the best console of a desktop and
// lists the others. Consoles are ranked by what their servers can do
// (vdi.Member.Ranked: a display, then the clipboard, then resizing), RDP
// before VNC between equals; an RDP server that does not answer an X.224
// probe is passed over. /connect answers from what the claim already knows:
// only the console it opens is probed on the way (and that probe started
// with the claim); the others are offered as they were last found, and the
// page asks again naming one (?protocol=) when the user picks it.

const (
	// probeTimeout bounds one probe of a desktop's RDP server: the direct
	// path's timeout and a fallback path (a peer, the apiserver) after it.
	probeTimeout = 3 * time.Second
	// probeTTL is how long a probe's result is reused, so that a click
	// (and the reconnects after it) does not wait on a slow server.
	probeTTL = 15 * time.Second
)

// probeResult is what a probe of one console of one member found.
type probeResult struct {
	ok          bool
	user, passw string // the sign-in, when the backend knows it
	at          time.Time
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
	m        map[probeKey]probeResult
	inflight map[probeKey]*probeCall
}

// probeCall is a probe under way; done closes when res is set. learned
// says whether res says something of the desktop (the prober's caller did
// not go away mid-probe).
type probeCall struct {
	done    chan struct{}
	res     probeResult
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

// end publishes a probe's result to those waiting on it.
func (c *probeCache) end(k probeKey, call *probeCall, res probeResult, learned bool) {
	c.mu.Lock()
	delete(c.inflight, k)
	c.mu.Unlock()
	call.res, call.learned = res, learned
	close(call.done)
}

func (c *probeCache) get(k probeKey, now time.Time) (probeResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	if !ok || now.Sub(r.at) > probeTTL {
		return probeResult{}, false
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

func (c *probeCache) put(k probeKey, r probeResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[probeKey]probeResult{}
	}
	for key, old := range c.m { // keep the map small: drop what expired
		if r.at.Sub(old.at) > probeTTL {
			delete(c.m, key)
		}
	}
	c.m[k] = r
}

// handleDesktopConnect serves GET /api/vdi/desktops/{ns}/{member}/connect.
func (h *Handler) handleDesktopConnect(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	if d.Power != vdi.PowerRunning || len(d.Protocols) == 0 {
		hint := "Start it, then connect again."
		if d.Power == vdi.PowerFailed {
			hint = "Release it and get another, or ask an admin."
		}
		msg := "Desktop " + d.Namespace + "/" + d.Name + " is " + string(d.Power) + "."
		if d.Reason != "" {
			msg += " " + d.Reason
		}
		return vdi.Errorf(vdi.EUnavailable, hint, "%s", msg)
	}
	opts := h.connectOptions(r.Context(), id, d, vdi.Protocol(r.URL.Query().Get("protocol")))
	if len(opts) == 0 {
		return vdi.Errorf(vdi.EUnavailable, "Stop and start the desktop, then connect again.", "No console of %s/%s answers.", d.Namespace, d.Name)
	}
	if id.Admin && r.URL.Query().Get("paths") == "1" {
		h.annotatePaths(r.Context(), d.Ref(), opts)
	}
	info := api.Connect{ConnectOption: opts[0], Fallbacks: append([]api.ConnectOption{}, opts[1:]...), Console: d.Console}
	if d.Recorded {
		info.Recorded, info.Notice = true, recordingNotice
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// connectOptions returns d's consoles, the one the request opens first:
// the ?protocol= it names when d offers it, else the most capable. The
// one it opens is probed (RDP's server must answer, a serial console's
// sign-in is read); the others are offered unless a probe found them
// dead, without the sign-in only a probe knows, so that /connect never
// waits on a console the page does not open.
func (h *Handler) connectOptions(ctx context.Context, id vdi.Identity, d vdi.Desktop, asked vdi.Protocol) []api.ConnectOption {
	ranked := d.Ranked()
	if i := slices.Index(ranked, asked); i > 0 {
		ranked = append([]vdi.Protocol{asked}, slices.Delete(ranked, i, i+1)...)
	}
	var opts []api.ConnectOption
	for _, p := range ranked {
		caps := d.CapsOf(p)
		o := api.ConnectOption{Protocol: p, WebSocket: "/ws/" + string(p) + "/" + d.Namespace + "/" + d.Name, Caps: &caps}
		opening := len(opts) == 0
		switch {
		case p == vdi.ProtocolRDP && opening:
			res := h.probe(ctx, d, p)
			if !res.ok {
				continue
			}
			o.Token = h.console.tokens.Mint(id.Login, d.Ref())
			o.Destination = rdpDestination(d.Ref())
			o.Credentials = holderSignIn(id, d, res)
		case p == vdi.ProtocolRDP:
			if res, known := h.probeKnown(d, p); known && !res.ok {
				continue
			}
		case p == vdi.ProtocolSerial && opening:
			o.Credentials = holderSignIn(id, d, h.probe(ctx, d, p))
		}
		opts = append(opts, o)
	}
	return opts
}

// probeKnown returns what the last probe of console p of d found, and
// false when none has answered yet (one is then started, for next time).
func (h *Handler) probeKnown(d vdi.Desktop, p vdi.Protocol) (probeResult, bool) {
	key := probeKey{d.Ref(), p, d.ClaimedAt.UnixMicro()}
	if res, ok := h.console.probes.get(key, time.Now()); ok {
		return res, true
	}
	go h.probe(context.Background(), d, p)
	return probeResult{}, false
}

// holderSignIn returns the sign-in a probe found, for the holder only.
func holderSignIn(id vdi.Identity, d vdi.Desktop, res probeResult) *api.Credentials {
	if d.Holder != id.Login || res.user == "" {
		return nil
	}
	return &api.Credentials{Username: res.user, Password: res.passw}
}

// probe connects to console p of d, checks that an RDP server answers an
// X.224 request (for RDP), and notes the sign-in the backend knows. Results
// are cached for probeTTL.
//
// RDP is probed by the path chain its consoles take (direct, peers, then
// e.g. the apiserver's port forward), so that a server only a fallback
// reaches is still offered. Other consoles are dialled directly, only for
// the sign-in the backend knows: a fallback would open the guest's one
// serial console just to close it again.
func (h *Handler) probe(ctx context.Context, d vdi.Desktop, p vdi.Protocol) probeResult {
	ref := d.Ref()
	key := probeKey{ref, p, d.ClaimedAt.UnixMicro()}
	for {
		if res, ok := h.console.probes.get(key, time.Now()); ok {
			return res
		}
		call, mine := h.console.probes.begin(key)
		if mine {
			res, learned := h.runProbe(ctx, d, p)
			h.console.probes.end(key, call, res, learned)
			return res
		}
		select {
		case <-call.done:
			if call.learned {
				return call.res
			}
			// Its caller went away mid-probe: probe again.
		case <-ctx.Done():
			return probeResult{}
		}
	}
}

// probeAhead probes d's RDP server as soon as d is claimed, in the
// background, so that the console page's /connect (which follows the
// claim's redirect by a few milliseconds) finds the answer ready or under
// way instead of waiting on a probe of its own.
func (h *Handler) probeAhead(d vdi.Desktop) {
	if d.Power != vdi.PowerRunning || !slices.Contains(d.Protocols, vdi.ProtocolRDP) {
		return
	}
	go h.probe(context.Background(), d, vdi.ProtocolRDP)
}

// runProbe is one probe of console p of d; learned is false when ctx ended
// mid-probe, so the result says nothing of the desktop and is not cached.
func (h *Handler) runProbe(ctx context.Context, d vdi.Desktop, p vdi.Protocol) (_ probeResult, learned bool) {
	ref := d.Ref()
	key := probeKey{ref, p, d.ClaimedAt.UnixMicro()}
	begin := time.Now()
	res := probeResult{}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	path := console.PathDirect
	if p == vdi.ProtocolRDP {
		conn, path, err = h.console.dial.Dial(ctx, ref, p)
	} else {
		conn, err = h.desktops.Dial(ctx, ref, p)
	}
	if err == nil {
		if c, ok := conn.(rdpSignIn); ok {
			res.user, res.passw = c.Credentials()
		}
		if p == vdi.ProtocolRDP {
			err = relay.ProbeRDP(ctx, conn)
		}
		conn.Close()
	}
	res.ok = err == nil
	if caller.Err() != nil {
		return res, false // the caller went away mid-probe: nothing learned about the desktop
	}
	switch {
	case err != nil && p == vdi.ProtocolRDP:
		h.log.Warn("console probe failed; offering the others", "desktop", ref, "protocol", p, "err", err)
	case err != nil:
		h.log.Debug("no sign-in from the backend for this console", "desktop", ref, "protocol", p, "err", err)
	}
	h.log.Debug("console probed", "desktop", ref, "protocol", p, "ok", res.ok, "path", path, "elapsed", time.Since(begin).Round(time.Millisecond))
	res.at = time.Now()
	h.console.probes.put(key, res)
	return res, true
}
