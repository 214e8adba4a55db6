package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestDrain: once draining, new consoles are refused with a 503-class
// error while the open one goes on, and Drain returns when it closes; a
// drain that times out says how many were still open.
func TestDrain(t *testing.T) {
	h := &Handler{consoles: newConsoleCount(0)}
	release, err := h.consoles.acquire("alice")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- h.Drain(ctx) }()
	for !h.Draining() {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.consoles.acquire("bob"); vdi.ErrorCode(err) != vdi.EUnavailable {
		t.Fatalf("a new console while draining: %v; want unavailable", err)
	}
	select {
	case n := <-done:
		t.Fatalf("Drain returned %d with a console open", n)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if n := <-done; n != 0 {
		t.Fatalf("Drain after the last console closed: %d left; want 0", n)
	}

	h = &Handler{consoles: newConsoleCount(0)}
	if _, err := h.consoles.acquire("alice"); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if n := h.Drain(short); n != 1 {
		t.Fatalf("Drain that timed out: %d left; want 1", n)
	}
}
