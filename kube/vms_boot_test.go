package kube_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMBooting starts VMs whose guests take a while to answer after QEMU
// is up (the stand-in reports the VMI and VM Running at once, as KubeVirt
// does): with a readinessProbe the member is starting ("booting") until
// the guest answers, and Start waits for that; without one it is running
// at once and QEMU's display answers through the apiserver meanwhile.
func TestVMBooting(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	const boot = 8 * time.Second // the booting window must outlast a loaded machine's VMI start and a poll
	halted := kubevirtv1.RunStrategyHalted
	mk := func(name string, probe *kubevirtv1.Probe) vdi.Ref {
		vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{vdi.LabelPool: "boot"}},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{ReadinessProbe: probe}}}}
		if err := admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		standIn.GuestBootTakes(ns, name, boot)
		return vdi.Ref{Namespace: ns, Name: name}
	}

	t.Run("ReadinessProbe", func(t *testing.T) {
		probe := &kubevirtv1.Probe{Handler: kubevirtv1.Handler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(kube.PortVNC)}}}
		ref := mk("probe-1", probe)
		begin := time.Now()
		if code, msg := putSubresource(t, s.sa, ns, ref.Name, "start"); code != http.StatusAccepted {
			t.Fatalf("start: %d %s", code, msg)
		}
		sawBooting := false
		for time.Since(begin) < boot+10*time.Second {
			m, err := vms.Member(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			var vmi kubevirtv1.VirtualMachineInstance
			if m.Power == vdi.PowerStarting && m.Reason == kube.ReasonBooting &&
				admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &vmi) == nil && vmi.Status.Phase == kubevirtv1.Running {
				sawBooting = true
			}
			if m.Power == vdi.PowerRunning {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !sawBooting {
			t.Error("never saw the member booting (VMI Running, guest not ready); want starting with reason booting in between")
		}
		if err := vms.Start(ctx, ref); err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		t.Logf("ready (guest answering) %s after the start", took.Round(time.Millisecond))
		if took < boot {
			t.Errorf("running after %s; want not before the guest's %s boot", took, boot)
		}
		conn, err := vms.Dial(ctx, ref, vdi.ProtocolVNC)
		if err != nil {
			t.Fatalf("direct VNC once ready: %v", err)
		}
		defer conn.Close()
		mustRFB(t, conn)
	})

	t.Run("NoProbe", func(t *testing.T) {
		ref := mk("plain-1", nil)
		// Its guest boots for an hour: Start returning at all shows it
		// did not wait for the guest.
		standIn.GuestBootTakes(ns, ref.Name, time.Hour)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := vms.Start(sctx, ref); err != nil {
			t.Fatalf("Start of a VM without a readinessProbe, its guest booting for an hour: %v; want it running as soon as QEMU is up", err)
		}
		apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.sa})
		if err != nil {
			t.Fatal(err)
		}
		conn, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
		if err != nil {
			t.Fatalf("QEMU's display while the guest boots: %v", err)
		}
		defer conn.Close()
		mustRFB(t, conn)
	})
}
