package kube_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestDirectDialFromCaches opens a VM's console on the direct path with
// the caches started: while the VMI cache has not seen the VM's new VMI
// (its watch held) the dial reads through to the API server and still
// reaches the desktop; once it has, a dial costs no API-server request.
func TestDirectDialFromCaches(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ref := vdi.Ref{Namespace: s.ns, Name: "desk-1"}
	testcluster.StoppedVM(t, s.admin, s.ns, ref.Name, map[string]string{vdi.LabelPool: "desk"})
	gate := newWatchGate("/virtualmachineinstances")
	defer gate.release()
	cfg := rest.CopyConfig(s.sa)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	counter := countRequests(cfg)
	back, ctx := mustCachedCluster(t, kube.Config{REST: cfg, Namespace: s.ns})

	gate.hold()
	if err := back.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	dial := func() (int, error) {
		n := counter.total()
		conn, err := back.Dial(ctx, ref, vdi.ProtocolVNC)
		if err != nil {
			return counter.total() - n, err
		}
		defer conn.Close()
		mustRFB(t, conn)
		return counter.total() - n, nil
	}
	if n, err := dial(); err != nil || n == 0 {
		t.Fatalf("direct dial before the VMI cache saw the VMI: %d requests, %v; want it read from the API server", n, err)
	}
	gate.release()
	eventually(t, 10*time.Second, func() string {
		if n, err := dial(); err != nil || n != 0 {
			return fmt.Sprintf("direct dial once the VMI cache caught up: %d requests, %v; want 0", n, err)
		}
		return ""
	})

	// A console open on the direct path ends once the VMI it reaches is
	// gone, not when the socket gives up minutes later.
	conn, err := back.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.ReadFull(conn, make([]byte, 12)); err != nil {
		t.Fatalf("the desktop's greeting: %v", err)
	}
	if err := back.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.Copy(io.Discard, conn); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the direct console after its VMI went: %v; want it closed by the portal", err)
	}
}
