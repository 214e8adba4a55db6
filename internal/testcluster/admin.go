package testcluster

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewAdminClient returns a controller-runtime client that acts as the
// cluster admin, as a kubectl user or a controller would, and knows every
// kind the tests and stand-ins handle: client-go's built-in kinds (core,
// RBAC, coordination...), KubeVirt's, VirtualMachineClone, VirtualMachineSnapshot and APIService.
func (c *Cluster) NewAdminClient() (client.WithWatch, error) {
	return newClient(c.Config)
}

// newClient is a client of cfg that knows the kinds NewAdminClient does.
func newClient(cfg *rest.Config) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, clonev1beta1.AddToScheme, snapshotv1beta1.AddToScheme, apiregistrationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("testcluster: admin scheme: %w", err)
		}
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("testcluster: admin client: %w", err)
	}
	return cl, nil
}

// AdminClient is NewAdminClient for tests: it fails tb on error.
func (c *Cluster) AdminClient(tb testing.TB) client.WithWatch {
	tb.Helper()
	cl, err := c.NewAdminClient()
	if err != nil {
		tb.Fatal(err)
	}
	return cl
}

// PortalServiceAccount returns a config that authenticates as the portal's
// ServiceAccount, corral-vdi/corral-vdi-portal, the one deploy/rbac.yaml
// binds; see ServiceAccount.
func (c *Cluster) PortalServiceAccount(tb testing.TB) *rest.Config {
	tb.Helper()
	return c.ServiceAccount(tb, "corral-vdi", "corral-vdi-portal")
}

// CreateStoppedVM creates a stopped VM with labels, as an admin makes a
// golden VM or a pool member with kubectl: runStrategy Halted, and
// printableStatus Stopped as KubeVirt would report it.
func CreateStoppedVM(ctx context.Context, cl client.Client, namespace, name string, labels map[string]string) (*kubevirtv1.VirtualMachine, error) {
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted}}
	if err := cl.Create(ctx, vm); err != nil {
		return nil, fmt.Errorf("testcluster: create VM %s/%s: %w", namespace, name, err)
	}
	// virt-controller, where it runs, writes the new VM's status too.
	stopped := func(vm *kubevirtv1.VirtualMachine) {
		vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	}
	if err := UpdateStatus(ctx, cl, vm, stopped); err != nil {
		return nil, fmt.Errorf("testcluster: status of VM %s/%s: %w", namespace, name, err)
	}
	return vm, nil
}

// StoppedVM is CreateStoppedVM for tests: it fails tb on error.
func StoppedVM(tb testing.TB, cl client.Client, namespace, name string, labels map[string]string) *kubevirtv1.VirtualMachine {
	tb.Helper()
	vm, err := CreateStoppedVM(context.Background(), cl, namespace, name, labels)
	if err != nil {
		tb.Fatal(err)
	}
	return vm
}
