// Command testcluster starts the tests' real kube-apiserver and etcd for a
// human (make cluster): it applies deploy/rbac.yaml, writes an admin
// kubeconfig and one for the portal's ServiceAccount, prints where they are,
// and runs until interrupted. With -demo it also starts the KubeVirt
// stand-in and a stand-in kubelet and makes demo pools (make run-cluster),
// and writes the file ready in -dir once all is up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

func main() {
	dir := flag.String("dir", filepath.Join("bin", "testcluster"), "where to write the kubeconfig files")
	rbac := flag.String("rbac", filepath.Join("deploy", "rbac.yaml"), "RBAC manifest to apply")
	withDemo := flag.Bool("demo", false, "also start the KubeVirt stand-in and a kubelet stand-in and make demo pools (a VM pool from a golden VM, a CT pool)")
	flag.Parse()
	if err := run(*dir, *rbac, *withDemo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir, rbac string, withDemo bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := testcluster.Start()
	if err != nil {
		return err
	}
	defer c.Stop()
	if err := c.ApplyFiles(ctx, rbac); err != nil {
		return err
	}
	sa, err := c.ServiceAccountConfig(ctx, "corral-vdi", "corral-vdi-portal")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	admin, portal := filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "portal.kubeconfig")
	for path, cfg := range map[string]*rest.Config{admin: c.Config, portal: sa} {
		buf, err := testcluster.Kubeconfig(cfg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, buf, 0o600); err != nil {
			return err
		}
	}
	fmt.Printf("kube-apiserver %s (etcd %s) at %s; Ctrl-C stops it and deletes its data.\n",
		testcluster.KubeVersion, testcluster.EtcdVersion, c.Config.Host)
	fmt.Printf("  as admin:      export KUBECONFIG=%s\n", admin)
	fmt.Printf("  as the portal: export KUBECONFIG=%s  (ServiceAccount corral-vdi/corral-vdi-portal, deploy/rbac.yaml)\n", portal)
	ready := filepath.Join(dir, "ready")
	os.Remove(ready)
	if withDemo {
		kubelet, err := demo(ctx, c, sa)
		if err != nil {
			return err
		}
		defer kubelet.Close()
		if err := os.WriteFile(ready, nil, 0o600); err != nil {
			return err
		}
		defer os.Remove(ready)
	}
	<-ctx.Done()
	return nil
}
