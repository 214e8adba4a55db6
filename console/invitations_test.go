package console

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// claimsStub is a claim whose invitation can be revoked, as another
// replica would: the change is reported on the channel ClaimChanged
// returned.
type claimsStub struct {
	mu      sync.Mutex
	share   *vdi.Share // nil: revoked
	changed chan struct{}
	checks  int
}

func (c *claimsStub) SharedDesktop(context.Context, vdi.Identity, vdi.Ref) (vdi.Desktop, vdi.Share, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	if c.share == nil {
		return vdi.Desktop{}, vdi.Share{}, vdi.Errorf(vdi.EForbidden, "", "not invited")
	}
	return vdi.Desktop{}, *c.share, nil
}

func (c *claimsStub) ClaimChanged(vdi.Ref) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// revoke ends the invitation and reports the change.
func (c *claimsStub) revoke() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.share = nil
	close(c.changed)
	c.changed = make(chan struct{})
}

// TestKeepShared_ChangedElsewhere: an invitee's console closes as soon as
// its claim changes on another replica and the invitation is gone, not
// at its next periodic check (an hour here); a change that leaves the
// invitation as it was keeps the console open.
func TestKeepShared_ChangedElsewhere(t *testing.T) {
	sh := vdi.Share{ID: "s1", User: "erin", By: "alice", Expires: time.Now().Add(time.Hour)}
	claims := &claimsStub{share: &sh, changed: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepShared(ctx, claims, vdi.Identity{Login: "erin"}, vdi.Ref{Namespace: "ns", Name: "m"}, sh, time.Hour, cancel)
	}()

	// A write that keeps the invitation (a heartbeat): checked, still open.
	checked := func() int {
		claims.mu.Lock()
		defer claims.mu.Unlock()
		return claims.checks
	}
	for checked() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	claims.mu.Lock()
	close(claims.changed)
	claims.changed = make(chan struct{})
	claims.mu.Unlock()
	for end := time.Now().Add(30 * time.Second); checked() < 2 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatalf("the invitee's console closed after a write that kept its invitation (%v); want it open", context.Cause(ctx))
	default:
	}
	if n := checked(); n < 2 {
		t.Fatalf("%d checks of the invitation after a write of its claim; want one more than at the start", n)
	}
	claims.revoke()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the invitee's console still open after its invitation was revoked elsewhere; want it closed at once")
	}
	var ended ShareEnded
	if cause := context.Cause(ctx); !errors.As(cause, &ended) {
		t.Errorf("the console closed with %v; want the invitation's end", cause)
	}
}
