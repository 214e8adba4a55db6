package testcluster_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func TestCluster(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)

	t.Run("Version", func(t *testing.T) {
		v, err := c.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != testcluster.KubeVersion {
			t.Errorf("apiserver version %s; want %s (built with the version ldflags)", v.GitVersion, testcluster.KubeVersion)
		}
	})
	t.Run("RBACIsOn", func(t *testing.T) {
		nobody := testcluster.Clientset(t, c.User(t, "nobody"))
		if _, err := nobody.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("a user with no role listing namespaces: %v; want Forbidden", err)
		}
		imp := testcluster.Clientset(t, c.Impersonate("nobody"))
		if _, err := imp.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the admin impersonating nobody listing namespaces: %v; want Forbidden", err)
		}
	})
	t.Run("UpdateMeetsAnotherWriter", func(t *testing.T) {
		// Another writer (a controller) changes the object between the
		// test's read and its write: Update reads it again and applies
		// the test's change on top, keeping the other's.
		cl := c.AdminClient(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(t), Name: "written-twice"}}
		if err := cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		calls := 0
		err := testcluster.Update(ctx, cl, cm.DeepCopy(), func(mine *corev1.ConfigMap) {
			if calls++; calls == 1 {
				other := cm.DeepCopy()
				other.Data = map[string]string{"other": "written"}
				if err := cl.Update(ctx, other); err != nil {
					t.Fatalf("the other writer: %v", err)
				}
			}
			if mine.Data == nil {
				mine.Data = map[string]string{}
			}
			mine.Data["mine"] = "written"
		})
		if err != nil || calls != 2 {
			t.Fatalf("Update after another writer: %v, change applied %d times; want done on the second try", err, calls)
		}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || len(cm.Data) != 2 {
			t.Errorf("after Update: %v, %v; want both writers' keys", cm.Data, err)
		}
	})
	t.Run("KubeVirtKinds", func(t *testing.T) {
		c.InstallKubeVirt(t)
		ns := c.Namespace(t)
		cl := c.AdminClient(t)
		stopped := kubevirtv1.RunStrategyHalted
		vm := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "golden", Labels: map[string]string{"corral.dev/vdi-pool": "demo"}},
			Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &stopped},
		}
		if err := cl.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		var list kubevirtv1.VirtualMachineList
		if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"corral.dev/vdi-pool": "demo"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Spec.RunStrategy == nil || *list.Items[0].Spec.RunStrategy != stopped {
			t.Errorf("listed %+v; want the one halted VM", list.Items)
		}
		if err := testcluster.UpdateStatus(ctx, cl, vm, func(vm *kubevirtv1.VirtualMachine) {
			vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
		}); err != nil {
			t.Errorf("status subresource: %v", err)
		}
	})
}
