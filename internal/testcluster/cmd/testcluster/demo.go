package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The demo's namespace, golden VM and pool.
const (
	demoNamespace = "vdi-demo"
	demoGolden    = "golden-desktop"
	demoPool      = "desktops"
	demoCTPool    = "shells"
)

// demo starts the KubeVirt stand-in (whose VMs are real local desktops)
// and a stand-in kubelet (whose Pods run local shells), and makes what an
// admin would before first use: a namespace with a stopped golden VM, a
// pool of three members cloned from it by the portal's own code as its
// ServiceAccount sa, and a CT pool of two shells declared in a ConfigMap.
// The caller closes the kubelet it returns.
func demo(ctx context.Context, c *testcluster.Cluster, sa *rest.Config) (*testcluster.Kubelet, error) {
	standIn, err := c.StartKubeVirtStandInErr(ctx)
	if err != nil {
		return nil, err
	}
	standIn.OnBoot(func(namespace, vm, ip, user, password string) {
		fmt.Printf("Demo: VM %s/%s booted at %s; its RDP sign-in is %s / %s\n", namespace, vm, ip, user, password)
	})
	kubelet, err := testcluster.NewKubelet(ctx, c.Config)
	if err != nil {
		return nil, err
	}
	if err := demoPools(ctx, c, sa); err != nil {
		kubelet.Close()
		return nil, err
	}
	return kubelet, nil
}

func demoPools(ctx context.Context, c *testcluster.Cluster, sa *rest.Config) error {
	admin, err := c.NewAdminClient()
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("demo namespace: %w", err)
	}
	if _, err := testcluster.CreateStoppedVM(ctx, admin, demoNamespace, demoGolden, nil); err != nil {
		return fmt.Errorf("demo golden VM: %w", err)
	}
	vms, err := kube.NewVMs(kube.Config{REST: sa})
	if err != nil {
		return err
	}
	p := vdi.Pool{Namespace: demoNamespace, Name: demoPool, Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: demoGolden, Size: 3}
	if err := vms.CreatePool(ctx, p); err != nil {
		return fmt.Errorf("demo pool: %w", err)
	}
	ct := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: kube.CTConfigMapName(demoCTPool),
		Labels: map[string]string{kube.LabelCTPool: demoCTPool}},
		Data: map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "2", kube.CTKeyMode: string(vdi.ModeEphemeral),
			kube.CTKeyShell: `["/bin/bash","-l"]`}}
	if err := admin.Create(ctx, ct); err != nil {
		return fmt.Errorf("demo CT pool: %w", err)
	}
	fmt.Printf("Demo: namespace %s, golden VM %s, pool %s of %d cloned from it, and CT pool %s of 2 shells.\n",
		demoNamespace, demoGolden, demoPool, p.Size, demoCTPool)
	return nil
}
