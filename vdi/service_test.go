package vdi_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// poolBackend is a narrow stand-in for one pool whose members power on and
// off instantly; the claim rules under test live in the Service.
type poolBackend struct {
	pool     vdi.Pool
	power    map[string]vdi.Power
	names    []string
	assigned map[string]string // member -> holder marked before Leases existed
	closed   map[string]string // member -> why it does not carry its pool's definition

	mirrorMu sync.Mutex
	mirrored map[string]string // member -> holder shown on it (written in the background)
}

func (b *poolBackend) MirrorClaim(_ context.Context, r vdi.Ref, holder string, _ time.Time) error {
	b.mirrorMu.Lock()
	defer b.mirrorMu.Unlock()
	if b.mirrored == nil {
		b.mirrored = map[string]string{}
	}
	b.mirrored[r.Name] = holder
	return nil
}

// shown returns the holder member's mirror shows, and whether one was written.
func (b *poolBackend) shown(member string) (string, bool) {
	b.mirrorMu.Lock()
	defer b.mirrorMu.Unlock()
	h, ok := b.mirrored[member]
	return h, ok
}

func newPoolBackend(mode vdi.Mode, names ...string) *poolBackend {
	b := &poolBackend{pool: vdi.Pool{Namespace: "local", Name: "demo", Mode: mode, Size: len(names)}, power: map[string]vdi.Power{}, names: names}
	for _, n := range names {
		b.power[n] = vdi.PowerStopped
	}
	return b
}

func (b *poolBackend) Pools(context.Context) ([]vdi.Pool, error) { return []vdi.Pool{b.pool}, nil }
func (b *poolBackend) Pool(context.Context, string, string) (vdi.Pool, error) {
	return b.pool, nil
}
func (b *poolBackend) Members(ctx context.Context, _, _ string) ([]vdi.Member, error) {
	var out []vdi.Member
	for _, n := range b.names {
		m, _ := b.Member(ctx, vdi.Ref{Namespace: "local", Name: n})
		out = append(out, m)
	}
	return out, nil
}
func (b *poolBackend) Member(_ context.Context, r vdi.Ref) (vdi.Member, error) {
	shown, _ := b.shown(r.Name)
	return vdi.Member{Namespace: r.Namespace, Name: r.Name, Pool: "demo", Power: b.power[r.Name], AssignedTo: b.assigned[r.Name], Shown: shown, Closed: b.closed[r.Name]}, nil
}
func (b *poolBackend) Start(_ context.Context, r vdi.Ref) error {
	b.power[r.Name] = vdi.PowerRunning
	return nil
}
func (b *poolBackend) Stop(_ context.Context, r vdi.Ref) error {
	b.power[r.Name] = vdi.PowerStopped
	return nil
}
func (b *poolBackend) Recreate(ctx context.Context, r vdi.Ref) error { return b.Stop(ctx, r) }
func (b *poolBackend) Dial(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error) {
	return nil, nil
}

func newService(t *testing.T, b vdi.Backend, now *time.Time) (*vdi.Service, *store.DB) {
	return newServiceWithPolicy(t, b, now, vdi.Policy{})
}

func newServiceWithPolicy(t *testing.T, b vdi.Backend, now *time.Time, policy vdi.Policy) (*vdi.Service, *store.DB) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db, Now: func() time.Time { return *now }, Policy: policy}), db
}

func TestServiceClaim(t *testing.T) {
	ctx := context.Background()
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}

	t.Run("ExpiredClaimIsTakenOver", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		svc, db := newService(t, newPoolBackend(vdi.ModeEphemeral, "demo-1"), &now)
		if _, err := svc.Claim(ctx, alice, "local", "demo"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Claim(ctx, bob, "local", "demo"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Fatalf("bob's claim while alice holds the only member: %v; want EConflict", err)
		}
		now = now.Add(vdi.DefaultLeaseDuration)
		d, err := svc.Claim(ctx, bob, "local", "demo")
		if err != nil || d.Holder != "bob" {
			t.Fatalf("bob's claim after alice's expired: %+v, %v; want bob holding demo-1", d, err)
		}
		log, _ := db.AuditLog(ctx, 1)
		if len(log) != 1 || log[0].Action != "claim" || log[0].Actor != "bob" {
			t.Errorf("newest audit entry %+v; want bob's claim", log)
		}
		if log, _ := db.AuditLog(ctx, 3); len(log) != 3 || log[1].Action != "takeover" {
			t.Errorf("audit %+v; want a takeover before bob's claim", log)
		}
		if _, err := svc.Desktop(ctx, alice, d.Ref()); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice after losing the claim: %v; want EForbidden", err)
		}
	})

	t.Run("MembersAssignedBeforeLeasesMigrate", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		b := newPoolBackend(vdi.ModePersistent, "demo-1", "demo-2", "demo-3")
		b.assigned = map[string]string{"demo-2": "alice", "demo-3": "carol"}
		b.power["demo-1"] = vdi.PowerRunning // would be preferred otherwise
		svc, _ := newService(t, b, &now)
		if d, err := svc.Claim(ctx, alice, "local", "demo"); err != nil || d.Name != "demo-2" {
			t.Errorf("alice's first claim = %s, %v; want demo-2, assigned to her before Leases", d.Name, err)
		}
		if d, err := svc.Claim(ctx, bob, "local", "demo"); err != nil || d.Name != "demo-1" {
			t.Errorf("bob's claim = %s, %v; want demo-1 (demo-3 is carol's)", d.Name, err)
		}
		if _, err := svc.Claim(ctx, vdi.Identity{Login: "dave"}, "local", "demo"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("dave's claim: %v; want EConflict: carol's pre-Lease member is not free", err)
		}
		if d, err := svc.Claim(ctx, vdi.Identity{Login: "carol"}, "local", "demo"); err != nil || d.Name != "demo-3" {
			t.Errorf("carol's claim = %s, %v; want demo-3", d.Name, err)
		}
	})

	t.Run("ClosedMemberIsNotClaimed", func(t *testing.T) {
		// A member that does not carry its pool's definition takes no
		// claim until it is repaired.
		now := time.Unix(1_800_000_000, 0)
		b := newPoolBackend(vdi.ModePersistent, "demo-1", "demo-2")
		b.closed = map[string]string{"demo-1": "it does not carry its pool's access"}
		svc, _ := newService(t, b, &now)
		if d, err := svc.Claim(ctx, alice, "local", "demo"); err != nil || d.Name != "demo-2" {
			t.Fatalf("alice's claim: %+v, %v; want demo-2, the member that is not closed", d, err)
		}
		if d, err := svc.Claim(ctx, bob, "local", "demo"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("bob's claim with only a closed member left: %+v, %v; want EConflict", d, err)
		}
	})

	t.Run("ClosedPoolIsForAdminsOnly", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		b := newPoolBackend(vdi.ModePersistent, "demo-1")
		b.pool.Closed = "no member carries the pool's access"
		svc, _ := newService(t, b, &now)
		if pools, err := svc.Pools(ctx, alice); err != nil || len(pools) != 0 {
			t.Errorf("alice's pools: %+v, %v; want the closed pool hidden", pools, err)
		}
		if _, err := svc.Claim(ctx, alice, "local", "demo"); vdi.ErrorCode(err) != vdi.EForbidden || !strings.Contains(err.Error(), "admins only") {
			t.Errorf("alice's claim on a closed pool: %v; want EForbidden saying it is for admins only", err)
		}
		root := vdi.Identity{Login: "root", Admin: true}
		if d, err := svc.Claim(ctx, root, "local", "demo"); err != nil || d.Name != "demo-1" {
			t.Errorf("an admin's claim on a closed pool: %+v, %v; want demo-1", d, err)
		}
	})

	t.Run("ReleaseStopsPersistentAndFrees", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		b := newPoolBackend(vdi.ModePersistent, "demo-1")
		svc, _ := newService(t, b, &now)
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		if err := svc.Release(ctx, bob, d.Ref(), ""); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("bob releasing alice's desktop: %v; want EForbidden", err)
		}
		if err := svc.Release(ctx, alice, d.Ref(), ""); err != nil {
			t.Fatal(err)
		}
		if b.power["demo-1"] != vdi.PowerStopped {
			t.Errorf("after release demo-1 is %s; want stopped", b.power["demo-1"])
		}
		// The mirror follows in the background, the claim's mark first.
		deadline := time.Now().Add(10 * time.Second)
		for h, ok := b.shown("demo-1"); !ok || h != ""; h, ok = b.shown("demo-1") {
			if time.Now().After(deadline) {
				t.Fatalf("claim mirror after release = %q (set: %v); want cleared", h, ok)
			}
			time.Sleep(10 * time.Millisecond)
		}
		pools, _ := svc.Pools(ctx, alice)
		if pools[0].Free != 1 {
			t.Errorf("free after release = %d; want 1", pools[0].Free)
		}
	})
}
