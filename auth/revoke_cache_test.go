package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// flakyRevocations is a sign-out store that stops answering on demand.
type flakyRevocations struct {
	down   bool
	before map[string]time.Time
}

func (f *flakyRevocations) SessionsRevokedBefore(_ context.Context, login string) (time.Time, error) {
	if f.down {
		return time.Time{}, errors.New("database does not answer")
	}
	return f.before[login], nil
}

func (f *flakyRevocations) RevokeSessions(_ context.Context, login string, t time.Time) error {
	if f.down {
		return errors.New("database does not answer")
	}
	f.before[login] = t
	return nil
}

func TestRevocationCache(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	store := &flakyRevocations{before: map[string]time.Time{"alice": now.Add(-time.Hour)}}
	c := newRevocationCache(store, func() time.Time { return now })
	if got, err := c.SessionsRevokedBefore(ctx, "alice"); err != nil || !got.Equal(now.Add(-time.Hour)) {
		t.Fatalf("first read = %v, %v", got, err)
	}
	store.before["alice"] = now // another replica signs alice out
	if got, _ := c.SessionsRevokedBefore(ctx, "alice"); !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("read within %v = %v; want the cached time", revocationFresh, got)
	}
	now = now.Add(revocationFresh)
	if got, _ := c.SessionsRevokedBefore(ctx, "alice"); !got.Equal(store.before["alice"]) {
		t.Errorf("read after %v = %v; want the other replica's sign-out", revocationFresh, got)
	}
	store.down = true
	now = now.Add(time.Minute)
	if got, err := c.SessionsRevokedBefore(ctx, "alice"); err != nil || !got.Equal(store.before["alice"]) {
		t.Errorf("known login while the database is down = %v, %v; want what was known", got, err)
	}
	if _, err := c.SessionsRevokedBefore(ctx, "bob"); err == nil {
		t.Error("a login never read while the database is down: no error; want a refusal (fail closed)")
	}
	signOut := now.Add(time.Second)
	c.RevokeSessions(ctx, "alice", signOut) // fails to write, but holds here
	if got, _ := c.SessionsRevokedBefore(ctx, "alice"); !got.Equal(signOut) {
		t.Errorf("after a sign-out during the outage = %v; want %v to hold on this replica", got, signOut)
	}
}
