package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestStandbyFollowsDemandOnKube keeps a standby that follows demand, with
// working hours, on a CT and a VM pool as the portal's ServiceAccount:
// created with it, read back from the ConfigMap or the members'
// annotations, changed and cleared through vdi.Service, and kept warm by
// KeepStandby (the schedule's floor of 1 holds every day).
func TestStandbyFollowsDemandOnKube(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.c.StartKubeVirtStandIn(t)
	testcluster.StoppedVM(t, s.c.AdminClient(t), ns, "golden", nil)
	root := vdi.Identity{Login: "root", Admin: true}
	allWeek := vdi.StandbySchedule{Days: "sun-sat", From: "00:00", To: "23:59", Standby: 1, Timezone: "Europe/Berlin"}

	for _, kind := range []vdi.Kind{vdi.KindCT, vdi.KindVM} {
		t.Run(string(kind), func(t *testing.T) {
			name, source := "warm-"+string(kind), "corral.test/shell"
			if kind == vdi.KindVM {
				source = "golden"
			}
			p := vdi.Pool{Namespace: ns, Name: name, Kind: kind, Mode: vdi.ModePersistent, Source: source, Size: 2,
				Standby: vdi.Standby{Min: 0, Max: 2}, StandbySchedule: allWeek}
			if err := s.svc.CreatePool(ctx, root, p); err != nil {
				t.Fatalf("create: %v", err)
			}
			got, err := s.back.Pool(ctx, ns, name)
			if err != nil || got.Standby != p.Standby || got.StandbySchedule != allWeek {
				t.Fatalf("pool read back: standby %s, schedule %s, %v; want 0-2 and %s", got.Standby, got.StandbySchedule, err, allWeek)
			}
			if _, err := s.svc.KeepStandby(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, func() string {
				ms, err := s.back.Members(ctx, ns, name)
				if err != nil {
					return err.Error()
				}
				warm := 0
				for _, m := range ms {
					if m.Power == vdi.PowerRunning {
						warm++
					}
				}
				if warm != 1 {
					return fmt.Sprintf("%d warm members; want the schedule's floor, 1", warm)
				}
				return ""
			})

			fixed := vdi.Fixed(1)
			if err := s.svc.UpdatePool(ctx, root, ns, name, vdi.PoolUpdate{Standby: &fixed, StandbySchedule: &vdi.StandbySchedule{}}); err != nil {
				t.Fatal(err)
			}
			got, err = s.back.Pool(ctx, ns, name)
			if err != nil || got.Standby != fixed || !got.StandbySchedule.IsZero() {
				t.Errorf("after the update: standby %s, schedule %s, %v; want 1 and none", got.Standby, got.StandbySchedule, err)
			}
		})
	}
}

// TestStandbyRefillsOnAnotherReplicasClaim runs the standby loop on one
// replica (the leader) with an hour between its ticks: a claim on another
// replica takes the warm member, and the leader refills at once from its
// Lease informer's event, not at its next tick.
func TestStandbyRefillsOnAnotherReplicasClaim(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	root := vdi.Identity{Login: "root", Admin: true}
	p := vdi.Pool{Namespace: ns, Name: "refill", Kind: vdi.KindCT, Mode: vdi.ModePersistent, Source: "corral.test/shell", Size: 3, Standby: vdi.Fixed(1)}
	if err := s.svc.CreatePool(ctx, root, p); err != nil {
		t.Fatal(err)
	}
	running := func() int {
		ms, err := s.back.Members(ctx, ns, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			if m.Power == vdi.PowerRunning {
				n++
			}
		}
		return n
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.svc.RunReclaimer(lctx, time.Hour) // the leader
	eventually(t, time.Minute, func() string {
		if n := running(); n != 1 {
			return fmt.Sprintf("%d running; want the standby's 1", n)
		}
		return ""
	})
	other := newService(s.back, mustLeases(t, s.c.PortalServiceAccount(t))) // another replica: no standby loop
	if _, err := other.Claim(ctx, vdi.Identity{Login: "alice"}, ns, p.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if n := running(); n != 2 {
			return fmt.Sprintf("%d running after another replica's claim; want alice's and a refilled standby", n)
		}
		return ""
	})
}
