package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// slowMember is a pool whose member reads take d (a replica whose reads
// go past its cache to a busy API server).
type slowMember struct {
	*poolBackend
	d time.Duration
}

func (b slowMember) Member(ctx context.Context, r vdi.Ref) (vdi.Member, error) {
	time.Sleep(b.d)
	return b.poolBackend.Member(ctx, r)
}

// TestClaimTrace_SlowClaimSaysWhere: a claim slower than 100 ms logs at
// Info where its time went, step by step, so a storm's tail is read from
// the replicas' logs.
func TestClaimTrace_SlowClaimSaysWhere(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs testlog.Buffer
	b := newPoolBackend(vdi.ModeEphemeral, "demo-1")
	b.power["demo-1"] = vdi.PowerRunning
	svc := vdi.NewService(vdi.Config{Backend: slowMember{b, 150 * time.Millisecond}, Leases: db.Leases(), Audit: db,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := svc.Claim(context.Background(), vdi.Identity{Login: "alice"}, "local", "demo"); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`level=INFO msg=claim user=alice took=\S+ steps="([^"]*)"`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("logs:\n%s\nwant an Info line of alice's claim with its steps", logs.String())
	}
	power := regexp.MustCompile(`\bpower=(\S+)`).FindStringSubmatch(m[1])
	if power == nil {
		t.Fatalf("alice's claim's steps %q; want its power step (the member's slow read)", m[1])
	}
	if d, err := time.ParseDuration(power[1]); err != nil || d < 150*time.Millisecond {
		t.Errorf("alice's claim's steps %q: power took %s; want the 150 ms its member's read took", m[1], power[1])
	}
	for _, step := range []string{"pool=", "write="} {
		if !regexp.MustCompile(`\b` + step).MatchString(m[1]) {
			t.Errorf("alice's claim's steps %q; want %s among them", m[1], step)
		}
	}
}
