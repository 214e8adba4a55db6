package vdi_test

import (
	"context"
	"slices"
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
	gone atomic.Value // the name of the member gone meanwhile, or ""
}

func (b *goneWhileReset) Recreate(ctx context.Context, r vdi.Ref) error {
	b.gone.Store(r.Name)
	defer b.gone.Store("")
	return b.slowRecreate.Recreate(ctx, r)
}

func (b *goneWhileReset) isGone(name string) bool {
	gone, _ := b.gone.Load().(string)
	return gone == name
}

func (b *goneWhileReset) Members(ctx context.Context, ns, pool string) ([]vdi.Member, error) {
	ms, err := b.slowRecreate.Members(ctx, ns, pool)
	return slices.DeleteFunc(ms, func(m vdi.Member) bool { return b.isGone(m.Name) }), err
}

func (b *goneWhileReset) Member(ctx context.Context, r vdi.Ref) (vdi.Member, error) {
	if b.isGone(r.Name) {
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
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"demo-1": "demo-2", "demo-2": "demo-1"}[d.Name]
	released := make(chan error, 1)
	go func() { released <- svc.Release(ctx, alice, d.Ref(), "") }()
	<-b.started
	finish := sync.OnceValue(func() error { close(b.release); return <-released })
	t.Cleanup(func() { finish() })

	all, err := svc.Desktops(ctx, admin, true)
	if err != nil || len(all) != 2 {
		t.Fatalf("every desktop = %+v, %v; want both members, the one being reset too", all, err)
	}
	if i := slices.IndexFunc(all, func(x vdi.Desktop) bool { return x.Name == d.Name }); i < 0 ||
		all[i].Resetting != "release" || all[i].Holder != "" || all[i].Power != vdi.PowerStopped {
		t.Errorf("every desktop = %+v; want %s resetting (release), no holder, stopped", all, d.Name)
	}
	if got, err := svc.Desktop(ctx, admin, d.Ref()); err != nil || got.Resetting != "release" || got.Holder != "" {
		t.Errorf("Desktop(%s) = %+v, %v; want it resetting with no holder", d.Name, got, err)
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
	if i := slices.IndexFunc(dash[0].Members, func(m vdi.MemberStatus) bool { return m.Name == d.Name }); i < 0 ||
		dash[0].Members[i].Resetting != "release" || dash[0].Members[i].Holder != "" {
		t.Errorf("dashboard rows = %+v; want %s resetting, no holder", dash[0].Members, d.Name)
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
	if d2, err := svc.Claim(ctx, alice, "local", "demo"); err != nil || d2.Name != other {
		t.Errorf("claim while %s resets = %s, %v; want %s", d.Name, d2.Name, err, other)
	}
	if err := finish(); err != nil {
		t.Fatalf("release = %v", err)
	}
	if got, err := svc.Desktop(ctx, admin, d.Ref()); err != nil || got.Resetting != "" || got.Holder != "" {
		t.Errorf("%s after its reset = %+v, %v; want it free", d.Name, got, err)
	}
}
