package vdi_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// goneWhileReset is an ephemeral pool whose reset deletes the member
// first and makes it again only when release closes (a re-clone on
// Kubernetes: between the delete and the new clone the member is gone).
type goneWhileReset struct {
	*slowRecreate
	gone atomic.Bool
}

func (b *goneWhileReset) Recreate(ctx context.Context, r vdi.Ref) error {
	b.gone.Store(true)
	defer b.gone.Store(false)
	return b.slowRecreate.Recreate(ctx, r)
}

func (b *goneWhileReset) Members(ctx context.Context, ns, pool string) ([]vdi.Member, error) {
	ms, err := b.slowRecreate.Members(ctx, ns, pool)
	if b.gone.Load() {
		ms = ms[1:] // demo-1, the member being reset
	}
	return ms, err
}

func (b *goneWhileReset) Member(ctx context.Context, r vdi.Ref) (vdi.Member, error) {
	if r.Name == "demo-1" && b.gone.Load() {
		return vdi.Member{}, vdi.Errorf(vdi.ENotFound, "", "Desktop %s not found.", r)
	}
	return b.slowRecreate.Member(ctx, r)
}

// TestResetting: a member being reset after its release — here gone
// meanwhile, as a re-clone's is between the delete and the new clone —
// is listed (desktops, dashboard, one desktop) as resetting with no
// holder, counted in its pool as resetting (neither free nor claimed), and
// refuses start, stop and assign; its old holder no longer lists it. Once
// the reset ends it is free.
func TestResetting(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	b := &goneWhileReset{slowRecreate: &slowRecreate{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"),
		started: make(chan string, 1), release: make(chan struct{})}}
	svc, _ := newService(t, b, &now)
	alice, admin := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "ops", Admin: true}
	d, err := svc.Claim(ctx, alice, "local", "demo")
	if err != nil || d.Name != "demo-1" {
		t.Fatalf("claim = %s, %v; want demo-1", d.Name, err)
	}
	released := make(chan error, 1)
	go func() { released <- svc.Release(ctx, alice, d.Ref(), "") }()
	<-b.started
	finish := sync.OnceValue(func() error { close(b.release); return <-released })
	t.Cleanup(func() { finish() })

	all, err := svc.Desktops(ctx, admin, true)
	if err != nil || len(all) != 2 {
		t.Fatalf("every desktop = %+v, %v; want both members, the one being reset too", all, err)
	}
	if got := all[0]; got.Name != "demo-1" || got.Resetting != "release" || got.Holder != "" || got.Power != vdi.PowerStopped {
		t.Errorf("member being reset = %+v; want demo-1 resetting (release), no holder, stopped", got)
	}
	if got, err := svc.Desktop(ctx, admin, d.Ref()); err != nil || got.Resetting != "release" || got.Holder != "" {
		t.Errorf("Desktop(demo-1) = %+v, %v; want it resetting with no holder", got, err)
	}
	if mine, err := svc.Desktops(ctx, alice, false); err != nil || len(mine) != 0 {
		t.Errorf("alice's desktops = %+v, %v; want none", mine, err)
	}
	pools, err := svc.Pools(ctx, alice)
	if err != nil || len(pools) != 1 || pools[0].Resetting != 1 || pools[0].Claimed != 0 || pools[0].Free != 1 {
		t.Errorf("pools = %+v, %v; want 1 resetting, 0 claimed, 1 free", pools, err)
	}
	dash, err := svc.Dashboard(ctx, admin)
	if err != nil || len(dash) != 1 || len(dash[0].Members) != 2 || dash[0].Resetting != 1 {
		t.Fatalf("dashboard = %+v, %v; want 2 members, 1 resetting", dash, err)
	}
	if m := dash[0].Members[0]; m.Resetting != "release" || m.Holder != "" {
		t.Errorf("dashboard row = %+v; want demo-1 resetting, no holder", m)
	}
	for name, try := range map[string]func() error{
		"start":  func() error { return svc.Start(ctx, admin, d.Ref()) },
		"stop":   func() error { return svc.Stop(ctx, admin, d.Ref()) },
		"assign": func() error { _, err := svc.Assign(ctx, admin, d.Ref(), "bob"); return err },
	} {
		if err := try(); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("%s of a member being reset = %v; want a conflict", name, err)
		}
	}
	// A second claim of the pool gets the other member, never this one.
	if d2, err := svc.Claim(ctx, alice, "local", "demo"); err != nil || d2.Name != "demo-2" {
		t.Errorf("claim while demo-1 resets = %s, %v; want demo-2", d2.Name, err)
	}
	if err := finish(); err != nil {
		t.Fatalf("release = %v", err)
	}
	if got, err := svc.Desktop(ctx, admin, d.Ref()); err != nil || got.Resetting != "" || got.Holder != "" {
		t.Errorf("demo-1 after its reset = %+v, %v; want it free", got, err)
	}
}
