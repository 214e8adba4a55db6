package testcluster

import (
	"context"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Refusal names writes the API server is to refuse: Operations on Resource
// (as "leases" or "virtualmachineclones/status") of Group, in Namespace
// (empty: every namespace), unless Allow, a CEL expression over object,
// oldObject and request, holds.
type Refusal struct {
	// Name names the ValidatingAdmissionPolicy and its binding; it must be
	// unique in the cluster while the refusal is in force.
	Name       string
	Operations []admissionregistrationv1.OperationType
	Group      string
	Resource   string
	Namespace  string
	Allow      string
	// Message is what the refused writer is told.
	Message string
}

// Refuse has the API server refuse the writes r names, as an admin's
// ValidatingAdmissionPolicy would, until lift is called (once or more) or
// the test ends. The API server puts a new policy in force a moment after
// it is made: the caller waits until a write of its own is refused (a dry
// run, or a probe object) before it counts on the refusal.
func Refuse(tb testing.TB, cl client.Client, r Refusal) (lift func()) {
	tb.Helper()
	ctx := context.Background()
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: r.Operations,
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{r.Group}, APIVersions: []string{"*"}, Resources: []string{r.Resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: r.Allow, Message: r.Message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: r.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if r.Namespace != "" {
		binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: r.Namespace}}}
	}
	var once sync.Once
	lift = func() {
		once.Do(func() {
			cl.Delete(ctx, binding)
			cl.Delete(ctx, policy)
		})
	}
	tb.Cleanup(lift)
	for _, o := range []client.Object{policy, binding} {
		if err := cl.Create(ctx, o); err != nil {
			tb.Fatalf("testcluster: refuse %s: %v", r.Message, err)
		}
	}
	return lift
}
