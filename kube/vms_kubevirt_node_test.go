package kube_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testKubeVirtNode: the portal starts a VM through KubeVirt's real
// virt-api (the start subresource, through the apiserver's aggregation)
// and virt-controller runs it on the node stand-in: the controller's
// virt-launcher Pod is bound and Running, its VMI goes Scheduled then
// Running with the Pod's IP, the portal's direct VNC reaches the guest's
// desktop there, and the portal's stop takes it down through
// virt-controller (VMI Succeeded, Pod and VMI deleted, VM Stopped).
func testKubeVirtNode(t *testing.T, s *kubeVirtSetup) {
	node := s.kv.StartNode(t)
	vm := s.golden(t, "runner", func(vm *kubevirtv1.VirtualMachine) { vm.Labels[vdi.LabelPool] = "run" })
	ref := vdi.Ref{Namespace: s.ns, Name: vm.Name}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var vmis kubevirtv1.VirtualMachineInstanceList
		var pods corev1.PodList
		s.admin.List(s.ctx, &vmis, client.InNamespace(s.ns))
		s.admin.List(s.ctx, &pods, client.InNamespace(s.ns))
		for _, v := range vmis.Items {
			t.Logf("VMI %s: phase %s node %q interfaces %+v conditions %+v", v.Name, v.Status.Phase, v.Status.NodeName, v.Status.Interfaces, v.Status.Conditions)
		}
		for _, p := range pods.Items {
			t.Logf("Pod %s: node %q phase %s IP %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
		}
	})
	begin := time.Now()
	if err := s.vms.Start(s.ctx, ref); err != nil {
		t.Fatalf("Start through virt-api's start subresource: %v", err)
	}
	if err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), vm); err != nil || vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusRunning {
		t.Fatalf("VM after Start: %s, %v; want Running", vm.Status.PrintableStatus, err)
	}
	t.Logf("VM started through virt-api, Running on virt-controller and the node stand-in in %s", time.Since(begin).Round(time.Millisecond))

	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), &vmi); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := s.admin.List(s.ctx, &pods, client.InNamespace(s.ns), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("virt-launcher Pods of the VMI: %d, %v; want virt-controller's one", len(pods.Items), err)
	}
	pod := pods.Items[0]
	if vmi.Status.NodeName != node.Name() || pod.Spec.NodeName != node.Name() {
		t.Errorf("VMI on node %q, Pod on %q; want the stand-in's %q", vmi.Status.NodeName, pod.Spec.NodeName, node.Name())
	}
	if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP != pod.Status.PodIP {
		t.Errorf("VMI interfaces %+v; want the launcher Pod's IP %s first", vmi.Status.Interfaces, pod.Status.PodIP)
	}
	if m, err := s.vms.Member(s.ctx, ref); err != nil || m.Power != vdi.PowerRunning {
		t.Fatalf("member %s: %+v, %v; want running", ref, m, err)
	}
	conn, err := s.vms.Dial(s.ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("direct VNC to the guest at its Pod's IP: %v", err)
	}
	mustRFB(t, conn)
	conn.Close()

	// Through virt-api and the node's virt-handler: the holder's VNC
	// console, a screenshot that leaves it connected, and the serial
	// console.
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.c.PortalServiceAccount(t)})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := apiserver.Dial(s.ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("VNC through virt-api: %v", err)
	}
	if _, err := snapshot.Take(holder, 0, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("the holder's VNC through virt-api: %v", err)
	}
	png, err := s.vms.Screenshot(s.ctx, ref)
	if err != nil {
		t.Fatalf("vnc/screenshot through virt-api: %v", err)
	}
	if img, err := snapshot.FromPNG(png, 320); err != nil || img.Bounds().Dx() != 320 {
		t.Fatalf("screenshot: %v; want a PNG", err)
	}
	if node.Screenshots() != 1 {
		t.Errorf("virt-handler served %d screenshots; want 1", node.Screenshots())
	}
	// A second VNC client, as another replica would dial (the portal asks
	// preserveSession), goes through KubeVirt's real virt-api to the
	// node's virt-handler and is refused there while the holder's is on:
	// never a kick.
	if second, err := apiserver.Dial(s.ctx, ref, vdi.ProtocolVNC); err == nil {
		second.Close()
		t.Error("a second VNC client through virt-api was let in beside the holder's; want it refused (preserveSession)")
	}
	if n := node.Consoles(s.ns, vm.Name, "vnc"); n != (testcluster.ConsoleCounts{Opened: 1, Refused: 1}) {
		t.Errorf("virt-handler's VNC console of the VMI: %+v; want the holder's opened and the second refused, none kicked", n)
	}
	if err := stillOpen(holder); err != nil {
		t.Errorf("the holder's console after a screenshot and a refused second client: %v; want it connected", err)
	}
	holder.Close() // the steps below open their own
	serial, err := apiserver.Dial(s.ctx, ref, vdi.ProtocolSerial)
	if err != nil {
		t.Fatalf("serial console through virt-api: %v", err)
	}
	serial.Close()
	if n := node.Consoles(s.ns, vm.Name, "console"); n != (testcluster.ConsoleCounts{Opened: 1}) {
		t.Errorf("virt-handler's serial console of the VMI: %+v; want 1 opened", n)
	}

	t.Run("ClaimWhileVirtAPIHangs", func(t *testing.T) {
		// The Lease is the truth: a claim of a running member answers once
		// it is won, whatever KubeVirt's webhooks (the claim mirror's VM
		// patch) do; the mirror follows once virt-api answers again.
		svc := newService(s.vms, mustLeases(t, s.c.PortalServiceAccount(t)))
		s.kv.FreezeVirtAPI(t)
		d, err := svc.Claim(s.ctx, vdi.Identity{Login: "alice"}, s.ns, "run")
		if err != nil || d.Name != "runner" || d.Holder != "alice" || d.Power != vdi.PowerRunning {
			t.Fatalf("claim while virt-api hangs: %+v, %v; want alice holding the running runner", d, err)
		}
		s.kv.ThawVirtAPI()
		s.waitFor(t, 60*time.Second, "the claim's mirror on the VM once virt-api answers", func() (bool, error) {
			if _, err := svc.RepairMirrors(s.ctx); err != nil {
				return false, err
			}
			err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), vm)
			return err == nil && vm.Labels[vdi.LabelAssignedTo] == "alice", err
		})
	})

	// A second node, started now so that the VM's first Pod went to node.
	to := s.kv.StartNode(t)
	t.Run("Migration", func(t *testing.T) { testKubeVirtMigration(t, s, node, to, ref) })
	// alice's desktop (on to after the migration), watched across portal
	// replicas.
	t.Run("OneScreenAcrossReplicas", func(t *testing.T) { testKubeVirtOneScreen(t, s, ref, node, to) })

	if err := s.vms.Stop(s.ctx, ref); err != nil {
		t.Fatalf("Stop through virt-api's stop subresource: %v", err)
	}
	s.waitFor(t, 60*time.Second, "VM runner Stopped, its VMI and Pod gone", func() (bool, error) {
		err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), vm)
		if err != nil || vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped {
			return false, err
		}
		var left corev1.PodList
		err = s.admin.List(s.ctx, &left, client.InNamespace(s.ns), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})
		return err == nil && len(left.Items) == 0 && apierrors.IsNotFound(s.admin.Get(s.ctx, client.ObjectKeyFromObject(&vmi), &kubevirtv1.VirtualMachineInstance{})), err
	})
	if conn, err := s.vms.Dial(s.ctx, ref, vdi.ProtocolVNC); err == nil {
		conn.Close()
		t.Error("direct VNC answered after the stop; want the guest gone")
	}
}
