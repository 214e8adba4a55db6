package kube_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testKubeVirtMigration: alice's running desktop live-migrates from node
// from to node to, by KubeVirt's own migration controller with the node
// stand-ins playing both virt-handlers. Her direct console (the portal's
// backend with its caches, as the portal runs it) is closed within
// seconds of the migration's end although the old stream goes silent
// without a FIN, and one reconnect reaches the same desktop at its new
// address; the serial console through virt-api ends with the source's
// QEMU rather than hanging. All along the desktop stays alice's: bob gets
// no desktop of the pool. Then a virt-handler restart on the new node cuts
// the consoles through it at once, leaves the direct console alone, and a
// reconnect once it is back works.
func testKubeVirtMigration(t *testing.T, s *kubeVirtSetup, from, to *testcluster.Node, ref vdi.Ref) {
	cl, ctx := mustCachedCluster(t, kube.Config{REST: s.c.PortalServiceAccount(t)})
	svc := newService(cl.VMs, mustLeases(t, s.c.PortalServiceAccount(t)))
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.c.PortalServiceAccount(t)})
	if err != nil {
		t.Fatal(err)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &vmi); err != nil || vmi.Status.NodeName != from.Name() || len(vmi.Status.Interfaces) == 0 {
		t.Fatalf("VMI before the migration: node %q, %v; want it running on %s", vmi.Status.NodeName, err, from.Name())
	}
	before := vmi.Status.Interfaces[0].IP
	console, err := cl.VMs.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("alice's direct console: %v", err)
	}
	defer console.Close()
	mustRFB(t, console)
	serial, err := apiserver.Dial(ctx, ref, vdi.ProtocolSerial)
	if err != nil {
		t.Fatalf("serial console through virt-api: %v", err)
	}
	defer serial.Close()

	mig := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: "move-" + ref.Name},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: ref.Name}}
	if err := s.admin.Create(s.ctx, mig); err != nil {
		t.Fatalf("create the VirtualMachineInstanceMigration (virt-api's admission): %v", err)
	}
	begin := time.Now()
	if d, err := svc.Claim(s.ctx, vdi.Identity{Login: "bob"}, ref.Namespace, "run"); err == nil {
		t.Errorf("bob claimed %s while alice's desktop migrates; want no desktop for him", d.Name)
	}
	var phases []kubevirtv1.VirtualMachineInstanceMigrationPhase
	s.waitFor(t, 120*time.Second, "the migration to succeed", func() (bool, error) {
		err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(mig), mig)
		if p := mig.Status.Phase; err == nil && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		if mig.Status.Phase == kubevirtv1.MigrationFailed {
			t.Fatalf("migration failed: %+v", mig.Status)
		}
		if err == nil {
			err = fmt.Errorf("phases %v", phases)
		}
		return mig.Status.Phase == kubevirtv1.MigrationSucceeded, err
	})
	t.Logf("migration phases seen: %v in %s", phases, time.Since(begin).Round(time.Millisecond))
	if !slices.Contains(phases, kubevirtv1.MigrationSucceeded) || len(phases) < 3 {
		t.Errorf("migration phases %v; want it stepped by virt-controller to Succeeded", phases)
	}
	if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &vmi); err != nil {
		t.Fatal(err)
	}
	after := ""
	if len(vmi.Status.Interfaces) > 0 {
		after = vmi.Status.Interfaces[0].IP
	}
	if ms := vmi.Status.MigrationState; vmi.Status.NodeName != to.Name() || ms == nil || !ms.Completed || ms.SourceNode != from.Name() || after == before || after == "" {
		t.Fatalf("VMI after the migration: node %q, migration state %+v, IP %q (was %q); want it completed on %s at a new IP", vmi.Status.NodeName, ms, after, before, to.Name())
	}

	// The old direct stream is silent without a FIN: only the portal's
	// VMI cache ends it.
	if err := waitClosed(console, 30*time.Second); err != nil {
		t.Fatalf("alice's direct console after the migration: %v; want it closed so that her page reconnects", err)
	}
	// ...saying why, which the page says as it reconnects.
	if _, err := console.Read(make([]byte, 1)); relay.Handover(err) == nil || !strings.Contains(err.Error(), kube.DesktopMoves) {
		t.Errorf("alice's direct console ended with %v; want relay.HandedOver(%q)", err, kube.DesktopMoves)
	}
	t.Logf("direct console closed %s after the migration began", time.Since(begin).Round(time.Millisecond))
	if err := waitClosed(serial, 30*time.Second); err != nil {
		t.Errorf("serial console through the source's virt-handler: %v; want it ended", err)
	}
	again, err := cl.VMs.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("alice's one reconnect: %v", err)
	}
	defer again.Close()
	mustRFB(t, again)
	if host, _, _ := net.SplitHostPort(again.RemoteAddr().String()); host != after {
		t.Errorf("the reconnect reached %s; want the desktop at its new address %s", host, after)
	}
	var pods corev1.PodList
	if err := s.admin.List(s.ctx, &pods, client.InNamespace(ref.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == from.Name() && p.Status.Phase == corev1.PodRunning {
			t.Errorf("source launcher Pod %s still Running on %s after the migration", p.Name, from.Name())
		}
	}
	if d, err := svc.Claim(s.ctx, vdi.Identity{Login: "bob"}, ref.Namespace, "run"); err == nil {
		t.Errorf("bob claimed %s after alice's desktop migrated; want it still hers", d.Name)
	}
	if m, err := cl.VMs.Member(s.ctx, ref); err != nil || m.Power != vdi.PowerRunning {
		t.Errorf("member after the migration: %+v, %v; want running", m, err)
	}

	t.Run("HandlerRestart", func(t *testing.T) {
		serial, err := apiserver.Dial(ctx, ref, vdi.ProtocolSerial)
		if err != nil {
			t.Fatalf("serial console through the new node's virt-handler: %v", err)
		}
		defer serial.Close()
		if err := to.RestartHandler(2 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := waitClosed(serial, 30*time.Second); err != nil {
			t.Errorf("serial console through a restarted virt-handler: %v; want it ended, not hanging", err)
		}
		if err := stillOpen(again); err != nil {
			t.Errorf("the direct console across a virt-handler restart: %v; want it connected", err)
		}
		s.waitFor(t, 60*time.Second, "a serial console through the restarted virt-handler", func() (bool, error) {
			c, err := apiserver.Dial(ctx, ref, vdi.ProtocolSerial)
			if err == nil {
				c.Close()
			}
			return err == nil, err
		})
	})
}

// waitClosed reads conn until it ends (nil) or within reports an error
// saying it is still open.
func waitClosed(conn net.Conn, within time.Duration) error {
	conn.SetReadDeadline(time.Now().Add(within))
	defer conn.SetReadDeadline(time.Time{})
	buf := make([]byte, 4096)
	for {
		_, err := conn.Read(buf)
		if errors.Is(err, net.ErrClosed) || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded)) {
			return nil
		}
		if err != nil {
			return errors.New("still open after " + within.String())
		}
	}
}
