package console

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// newestStub is a claim whose newest console another replica records.
type newestStub struct {
	mu      sync.Mutex
	newest  string
	changed chan struct{}
}

func (c *newestStub) NewestConsole(context.Context, vdi.Ref, vdi.Protocol) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newest, nil
}

func (c *newestStub) ClaimChanged(vdi.Ref) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// s1 and s2 are two consoles' stamps, s2 the newer.
var s1, s2 = "00000000000000000001.s1", "00000000000000000002.s2"

// take records console as the newest, as a replica's TakeConsole does.
func (c *newestStub) take(console string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newest = console
	close(c.changed)
	c.changed = make(chan struct{})
}

// TestKeepNewest_TakenOverElsewhere: the holder's console ends, taken
// over, as soon as the claim names a newer console of theirs (opened on
// another replica), and not while it names this one.
func TestKeepNewest_TakenOverElsewhere(t *testing.T) {
	claims := &newestStub{newest: s1, changed: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepNewest(ctx, claims, vdi.Ref{Namespace: "ns", Name: "m"}, vdi.ProtocolVNC, s1, cancel, slog.New(slog.DiscardHandler))
	}()
	claims.take(s1) // its own write, seen late
	claims.take(s2)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the console still open after a newer one was recorded elsewhere; want it taken over")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrTakenOver) {
		t.Errorf("the console ended with %v; want %v", cause, ErrTakenOver)
	}
}

// TestKeepNewest_StaysNewest: writes of the claim that still name this
// console leave it open.
func TestKeepNewest_StaysNewest(t *testing.T) {
	claims := &newestStub{newest: s1, changed: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepNewest(ctx, claims, vdi.Ref{Namespace: "ns", Name: "m"}, vdi.ProtocolVNC, s1, cancel, slog.New(slog.DiscardHandler))
	}()
	for range 3 {
		claims.take(s1)
	}
	cancel(nil)
	<-done
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		t.Errorf("the console ended with %v; want it open until it closed itself", cause)
	}
}
