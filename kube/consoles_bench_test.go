package kube_test

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchmarkVNCOpen measures opening a running VM's VNC console up to the
// server's RFB greeting by each path the portal takes: direct to the VMI's
// IP, and through the API server's vnc subresource (a TLS websocket through
// the aggregator to the KubeVirt stand-in). scripts/bench.sh reports the
// second as a ratio of the first.
func BenchmarkVNCOpen(b *testing.B) {
	ctx := context.Background()
	c := testcluster.Shared(b)
	c.StartKubeVirtStandIn(b)
	c.Apply(b, "../deploy/rbac.yaml")
	ns := c.Namespace(b)
	testcluster.StoppedVM(b, c.AdminClient(b), ns, "bench-1", map[string]string{vdi.LabelPool: "bench"})
	sa := c.PortalServiceAccount(b)
	vms, err := kube.NewVMs(kube.Config{REST: sa})
	if err != nil {
		b.Fatal(err)
	}
	ref := vdi.Ref{Namespace: ns, Name: "bench-1"}
	if err := vms.Start(ctx, ref); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { vms.Stop(context.Background(), ref) })
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: sa})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []struct {
		name string
		dial func(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error)
	}{{"direct", vms.Dial}, {"apiserver", apiserver.Dial}} {
		b.Run("path="+path.name, func(b *testing.B) {
			greeting := make([]byte, 12) // "RFB 003.008\n"
			for b.Loop() {
				conn, err := path.dial(ctx, ref, vdi.ProtocolVNC)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, greeting); err != nil || string(greeting[:4]) != "RFB " {
					b.Fatalf("greeting %q, %v", greeting, err)
				}
				conn.Close()
			}
		})
	}
}
