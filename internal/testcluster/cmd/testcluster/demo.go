package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The demo's namespace, golden VM and pool.
const (
	demoNamespace = "vdi-demo"
	demoGolden    = "golden-desktop"
	demoPool      = "desktops"
)

// demo starts the KubeVirt stand-in (whose VMs are real local desktops)
// and makes what an admin would before first use: a namespace with a
// stopped golden VM, and a pool of three members cloned from it by the
// portal's own code as its ServiceAccount sa.
func demo(ctx context.Context, c *testcluster.Cluster, sa *rest.Config) error {
	if _, err := c.StartKubeVirtStandInErr(ctx); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	admin, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("demo namespace: %w", err)
	}
	halted := kubevirtv1.RunStrategyHalted
	golden := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoGolden},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted}}
	if err := admin.Create(ctx, golden); err != nil {
		return fmt.Errorf("demo golden VM: %w", err)
	}
	golden.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	if err := admin.Status().Update(ctx, golden); err != nil {
		return fmt.Errorf("demo golden VM status: %w", err)
	}
	vms, err := kube.NewVMs(sa, "")
	if err != nil {
		return err
	}
	p := vdi.Pool{Namespace: demoNamespace, Name: demoPool, Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: demoGolden, Size: 3}
	if err := vms.CreatePool(ctx, p); err != nil {
		return fmt.Errorf("demo pool: %w", err)
	}
	fmt.Printf("Demo: namespace %s, golden VM %s, pool %s of %d cloned from it.\n", demoNamespace, demoGolden, demoPool, p.Size)
	return nil
}
