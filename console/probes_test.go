package console

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestProbeCache(t *testing.T) {
	var c probeCache
	k := probeKey{vdi.Ref{Namespace: "local", Name: "demo-1"}, vdi.ProtocolRDP, time.Now().UnixMicro()}
	t0 := time.Now()
	if _, ok := c.get(k, t0); ok {
		t.Fatal("get on an empty cache found a result")
	}
	c.put(k, ProbeResult{OK: true, At: t0})
	if r, ok := c.get(k, t0.Add(probeTTL-time.Second)); !ok || !r.OK {
		t.Errorf("get within the TTL = %v, %v; want the cached success", r, ok)
	}
	if _, ok := c.get(k, t0.Add(probeTTL+time.Second)); ok {
		t.Error("get after the TTL found a result; want a fresh probe")
	}
	// Expired entries go when new ones come.
	k2 := probeKey{k.ref, vdi.ProtocolSerial, k.claimed}
	c.put(k2, ProbeResult{At: t0.Add(2 * probeTTL)})
	if len(c.m) != 1 {
		t.Errorf("cache holds %d entries after an expired one; want 1", len(c.m))
	}
	// A new claim of the member, or a start or stop, is probed afresh.
	c.put(k, ProbeResult{OK: true, At: t0.Add(2 * probeTTL)})
	if _, ok := c.get(probeKey{k.ref, k.p, k.claimed + 1}, t0.Add(2*probeTTL)); ok {
		t.Error("get under a new claim found the old claim's result")
	}
	c.forget(k.ref)
	if len(c.m) != 0 {
		t.Errorf("cache holds %d entries after forget; want 0", len(c.m))
	}
}

// TestProbeCache_InFlight: a second asker of a probe under way waits for
// its answer (the console page's /connect for the probe its claim started)
// instead of probing again.
func TestProbeCache_InFlight(t *testing.T) {
	var c probeCache
	k := probeKey{vdi.Ref{Namespace: "local", Name: "demo-1"}, vdi.ProtocolRDP, 1}
	call, mine := c.begin(k)
	if !mine {
		t.Fatal("begin on an idle key: mine = false; want the caller to probe")
	}
	again, mine := c.begin(k)
	if mine || again != call {
		t.Fatalf("begin under way: mine = %v, same call = %v; want false, true", mine, again == call)
	}
	select {
	case <-again.done:
		t.Fatal("done before end")
	default:
	}
	c.end(k, call, ProbeResult{OK: true}, true)
	<-again.done
	if !again.res.OK || !again.learned {
		t.Errorf("waiter got %+v, learned %v; want the prober's success", again.res, again.learned)
	}
	if _, mine := c.begin(k); !mine {
		t.Error("begin after end: mine = false; want a new probe")
	}
}

// signInConn is a console connection whose sign-in the backend knows.
type signInConn struct{ net.Conn }

func (signInConn) Credentials() (string, string) { return "user", "s3cret" }

// signInDirect hands out signInConns and counts its dials.
type signInDirect struct{ dials int }

func (d *signInDirect) Dial(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error) {
	d.dials++
	a, b := net.Pipe()
	b.Close()
	return signInConn{a}, nil
}

// TestConsoleProbe: a serial console's probe reads the sign-in the backend
// knows and is reused under the same claim, probed afresh under a new one
// or after Forget; an RDP server that does not answer X.224 is not OK.
func TestConsoleProbe(t *testing.T) {
	direct := &signInDirect{}
	c := New(Config{Direct: direct})
	d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "vm-1", Power: vdi.PowerRunning}, ClaimedAt: time.Now()}
	ctx := context.Background()
	if res := c.Probe(ctx, d, vdi.ProtocolSerial); !res.OK || res.User != "user" || res.Password != "s3cret" {
		t.Fatalf("Probe(serial) = %+v; want OK with the backend's sign-in", res)
	}
	c.Probe(ctx, d, vdi.ProtocolSerial)
	if direct.dials != 1 {
		t.Errorf("%d dials for two probes under one claim; want 1 (cached)", direct.dials)
	}
	if res, known := c.ProbeKnown(d, vdi.ProtocolSerial); !known || !res.OK {
		t.Errorf("ProbeKnown = %+v, %v; want the cached result", res, known)
	}
	d.ClaimedAt = d.ClaimedAt.Add(time.Second)
	c.Probe(ctx, d, vdi.ProtocolSerial)
	c.Forget(d.Ref())
	c.Probe(ctx, d, vdi.ProtocolSerial)
	if direct.dials != 3 {
		t.Errorf("%d dials; want 3 (a new claim and Forget each probe afresh)", direct.dials)
	}
	if res := c.Probe(ctx, d, vdi.ProtocolRDP); res.OK {
		t.Errorf("Probe(rdp) of a server that hangs up = %+v; want not OK", res)
	}
}

// TestConsoleProbe_OthersLater: the consoles a page lists beside the one it
// opens are probed later (probeLater), once each, not while that console
// fetches its first screen; the claim probes RDP ahead only where RDP is
// the console its page opens.
func TestConsoleProbe_OthersLater(t *testing.T) {
	direct := &signInDirect{}
	c := New(Config{Direct: direct})
	var waits []time.Duration
	var due []func()
	c.after = func(d time.Duration, f func()) { waits, due = append(waits, d), append(due, f) }
	shadow := map[vdi.Protocol]vdi.Caps{vdi.ProtocolRDP: {Display: true}}
	d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "ct-1", Power: vdi.PowerRunning,
		Protocols: []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC}, ConsoleCaps: shadow}, ClaimedAt: time.Now()}
	for range 3 {
		if _, known := c.ProbeKnown(d, vdi.ProtocolRDP); known {
			t.Fatal("ProbeKnown before any probe: known; want not yet")
		}
	}
	if direct.dials != 0 || len(due) != 1 || waits[0] != probeLater {
		t.Fatalf("after ProbeKnown thrice: %d dials, %d probes waiting (%v); want none now and one in %v", direct.dials, len(due), waits, probeLater)
	}
	due[0]()
	if res, known := c.ProbeKnown(d, vdi.ProtocolRDP); direct.dials != 1 || !known || res.OK {
		t.Errorf("after the later probe: %d dials, known %v, %+v; want 1 dial and the server that hangs up known as not OK", direct.dials, known, res)
	}

	// The claim: VNC opens first on this desktop (freerdp-shadow ranks
	// below it), so RDP is not probed ahead; on a Windows VM it is.
	d.ClaimedAt = d.ClaimedAt.Add(time.Second)
	c.ProbeAhead(d)
	vm := vdi.Desktop{Member: vdi.Member{Namespace: "vms", Name: "win-1", Power: vdi.PowerRunning,
		Protocols: []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolRDP}}, ClaimedAt: time.Now()}
	c.ProbeAhead(vm)
	vmKey := probeKey{vm.Ref(), vdi.ProtocolRDP, vm.ClaimedAt.UnixMicro()}
	probed := false
	for end := time.Now().Add(10 * time.Second); !probed && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		_, probed = c.probes.get(vmKey, time.Now())
	}
	if !probed {
		t.Error("a Windows VM's claim did not probe its RDP server ahead in 10 s; want it probed")
	}
	if _, known := c.probes.get(probeKey{d.Ref(), vdi.ProtocolRDP, d.ClaimedAt.UnixMicro()}, time.Now()); known {
		t.Error("a desktop that opens VNC first had its RDP server probed at the claim; want it left for later")
	}
}
