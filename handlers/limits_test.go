package handlers

import (
	"testing"
	"time"
)

func TestUserLimits(t *testing.T) {
	l := newUserLimits(RateLimit{Every: time.Second, Burst: 3})
	now := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if _, ok := l.allow("mallory", now); !ok {
			t.Fatalf("request %d of a burst of 3 refused", i+1)
		}
	}
	if wait, ok := l.allow("mallory", now); ok || wait <= 0 || wait > time.Second {
		t.Errorf("4th request: ok %v, wait %v; want refused with a wait up to 1s", ok, wait)
	}
	if _, ok := l.allow("alice", now); !ok {
		t.Error("mallory's volume refused alice")
	}
	if _, ok := l.allow("mallory", now.Add(time.Second)); !ok {
		t.Error("a second later mallory is still refused")
	}
}

func TestConsoleCount(t *testing.T) {
	c := newConsoleCount(2)
	r1, err1 := c.acquire("alice")
	_, err2 := c.acquire("alice")
	if err1 != nil || err2 != nil {
		t.Fatalf("first two consoles: %v, %v", err1, err2)
	}
	if _, err := c.acquire("alice"); err == nil {
		t.Fatal("third console allowed; want the cap of 2")
	} else if le, ok := err.(*limitError); !ok || le.After <= 0 {
		t.Errorf("third console: %v; want a limitError with Retry-After", err)
	}
	if _, err := c.acquire("bob"); err != nil {
		t.Errorf("bob refused for alice's consoles: %v", err)
	}
	r1()
	r1() // releasing twice frees one slot only
	if _, err := c.acquire("alice"); err != nil {
		t.Errorf("after closing one: %v", err)
	}
	if _, err := c.acquire("alice"); err == nil {
		t.Error("a double release freed two slots")
	}
	if _, err := newConsoleCount(-1).acquire("alice"); err != nil {
		t.Errorf("no cap: %v", err)
	}
}
