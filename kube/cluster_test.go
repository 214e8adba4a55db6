package kube_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	scheme := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(s.c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vms-1", Labels: map[string]string{vdi.LabelPool: "vms"}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted}}
	if err := admin.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
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
