package kube_test

import (
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestClusterDispatch runs VM and CT pools side by side through
// kube.Cluster: pools merge, each member goes to its own kind, and a name
// taken by one kind is refused to the other.
func TestClusterDispatch(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.c.InstallKubeVirt(t)
	testcluster.StoppedVM(t, s.c.AdminClient(t), ns, "vms-1", map[string]string{vdi.LabelPool: "vms"})
	s.configMap(t, "cts", map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1"})

	pools, err := s.back.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]vdi.Kind{}
	for _, p := range pools {
		if p.Namespace == ns {
			kinds[p.Name] = p.Kind
		}
	}
	if kinds["vms"] != vdi.KindVM || kinds["cts"] != vdi.KindCT || len(kinds) != 2 {
		t.Errorf("pools in %s: %v; want vms (vm) and cts (ct)", ns, kinds)
	}
	for ref, want := range map[vdi.Ref]string{{Namespace: ns, Name: "vms-1"}: "vms", {Namespace: ns, Name: "cts-1"}: "cts"} {
		if m, err := s.back.Member(ctx, ref); err != nil || m.Pool != want {
			t.Errorf("member %s: %+v, %v; want one of pool %s", ref, m, err, want)
		}
	}
	if _, err := s.back.Member(ctx, vdi.Ref{Namespace: ns, Name: "nope-1"}); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("unknown member: %v; want ENotFound", err)
	}
	for _, kind := range []vdi.Kind{vdi.KindCT, vdi.KindVM} {
		for _, name := range []string{"vms", "cts"} {
			err := s.back.CreatePool(ctx, vdi.Pool{Namespace: ns, Name: name, Kind: kind, Mode: vdi.ModeEphemeral, Source: "x", Size: 1})
			if vdi.ErrorCode(err) != vdi.EConflict {
				t.Errorf("a %s pool named like the existing pool %s: %v; want EConflict", kind, name, err)
			}
		}
	}
	if err := s.back.Start(ctx, vdi.Ref{Namespace: ns, Name: "cts-1"}); err != nil {
		t.Errorf("start the CT member: %v", err)
	}
}
