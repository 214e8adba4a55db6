package portal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestAPIServerHealth: with the kube backend the portal is ready while its
// API server answers, not ready (and the pages say so) while it is down,
// and ready again once it is back. A cluster of its own: the test stops it.
func TestAPIServerHealth(t *testing.T) {
	c := testcluster.MustStart(t)
	// An identity bound to nothing: the default RBAC lets it read /readyz.
	h := &apiserverHealth{cs: testcluster.Clientset(t, c.ServiceAccount(t, c.Namespace(t), "unbound"))}
	ctx := context.Background()
	if err := h.check(ctx); err != nil {
		t.Fatalf("with the API server up: %v", err)
	}
	if n := h.notice(); n != "" {
		t.Errorf("notice with the API server up: %q", n)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- c.RestartAPIServer(6 * time.Second) }()
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		err = h.check(ctx)
	}
	if !errors.Is(err, errNotReady) || !strings.Contains(err.Error(), "Kubernetes API server does not answer") {
		t.Fatalf("with the API server down: %v; want not ready, saying why", err)
	}
	if n := h.notice(); !strings.Contains(n, "claims and new consoles wait") {
		t.Errorf("the pages' notice while it is down: %q", n)
	}
	// A blip keeps the replica in the Service (pages explain it); an
	// outage past apiserverOutageReady takes it out.
	if err := h.ready(ctx, time.Now()); err != nil {
		t.Errorf("readiness right after the API server went away: %v; want ready (a blip)", err)
	}
	if err := h.ready(ctx, time.Now().Add(apiserverOutageReady+time.Second)); !errors.Is(err, errNotReady) {
		t.Errorf("readiness %v after the API server went away: %v; want not ready", apiserverOutageReady, err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for h.check(ctx) != nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if err := h.check(ctx); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if n := h.notice(); n != "" {
		t.Errorf("notice after the restart: %q", n)
	}
}
