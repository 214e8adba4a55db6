package handlers

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestProbeCache(t *testing.T) {
	var c probeCache
	k := probeKey{vdi.Ref{Namespace: "local", Name: "demo-1"}, vdi.ProtocolRDP}
	t0 := time.Now()
	if _, ok := c.get(k, t0); ok {
		t.Fatal("get on an empty cache found a result")
	}
	c.put(k, probeResult{ok: true, at: t0})
	if r, ok := c.get(k, t0.Add(probeTTL-time.Second)); !ok || !r.ok {
		t.Errorf("get within the TTL = %v, %v; want the cached success", r, ok)
	}
	if _, ok := c.get(k, t0.Add(probeTTL+time.Second)); ok {
		t.Error("get after the TTL found a result; want a fresh probe")
	}
	// Expired entries go when new ones come.
	k2 := probeKey{k.ref, vdi.ProtocolSerial}
	c.put(k2, probeResult{at: t0.Add(2 * probeTTL)})
	if len(c.m) != 1 {
		t.Errorf("cache holds %d entries after an expired one; want 1", len(c.m))
	}
}

func TestOffers(t *testing.T) {
	d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "demo-1", Power: vdi.PowerRunning,
		Protocols: []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC, vdi.ProtocolTerminal}}}
	tests := []struct {
		power vdi.Power
		p     vdi.Protocol
		code  vdi.Code
	}{
		{vdi.PowerRunning, vdi.ProtocolTerminal, ""},
		{vdi.PowerRunning, vdi.ProtocolSerial, vdi.EInvalid},
		{vdi.PowerStopped, vdi.ProtocolVNC, vdi.EUnavailable},
	}
	for _, tt := range tests {
		d.Power = tt.power
		err := offers(d, tt.p)
		var e *vdi.Error
		if got := vdi.Code(""); errors.As(err, &e) {
			got = e.Code
			if got != tt.code {
				t.Errorf("offers(%s, %s) = %v; want code %q", tt.power, tt.p, err, tt.code)
			}
		} else if err != nil || tt.code != "" {
			t.Errorf("offers(%s, %s) = %v; want code %q", tt.power, tt.p, err, tt.code)
		}
	}
}

func TestFinal(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{vdi.Errorf(vdi.ENotFound, "", "no such desktop"), true},
		{vdi.Errorf(vdi.EUnavailable, "", "not running"), true},
		{&vdi.Error{Code: vdi.EUnavailable, Err: errors.New("connection refused")}, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := final(tt.err); got != tt.want {
			t.Errorf("final(%v) = %v; want %v", tt.err, got, tt.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		origin, host string
		want         bool
	}{
		{"", "portal:8080", true},
		{"http://portal:8080", "portal:8080", true},
		{"https://PORTAL:8080", "portal:8080", true},
		{"http://evil.example", "portal:8080", false},
		{"http://portal:8081", "portal:8080", false},
		{"null", "portal:8080", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://"+tt.host+"/ws/terminal/local/x", nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		if got := sameOrigin(r); got != tt.want {
			t.Errorf("sameOrigin(Origin %q, Host %q) = %v; want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}
