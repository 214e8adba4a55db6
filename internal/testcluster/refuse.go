package testcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// refusalInForce bounds Refuse's wait for the API server to put its
// policy in force (or take it away): it loads policies a moment after they
// are made (an informer, then a pass each second), which a loaded machine
// stretches to seconds.
const refusalInForce = 2 * time.Minute

// Refuse has the API server refuse the writes r names, as an admin's
// ValidatingAdmissionPolicy would, until lift is called (once or more) or
// the test ends. It returns once the refusal is in force, and lift once
// it is lifted: the API server loads a new policy and its binding
// asynchronously, a moment (on a loaded machine, seconds) after they are
// made, and a write in that moment would pass. Each is seen on a probe:
// the policy refuses as well a dry-run create of one ConfigMap of its own
// (r's namespace, or "default"), and its resources come into force with
// their policy and binding, all at once.
func Refuse(tb testing.TB, cl client.Client, r Refusal) (lift func()) {
	tb.Helper()
	ctx := context.Background()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: "refusal-probe-" + r.Name}}
	if probe.Namespace == "" {
		probe.Namespace = metav1.NamespaceDefault
	}
	isProbe := fmt.Sprintf("request.resource.group == '' && request.resource.resource == 'configmaps' && request.name == '%s'", probe.Name)
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
			}, {
				ResourceNames: []string{probe.Name},
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "!(" + isProbe + ")", Message: "the refusal's probe"},
				{Expression: "(" + isProbe + ") || (" + r.Allow + ")", Message: r.Message},
			},
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
	// refused reports whether the API server refuses the probe with this
	// policy, and what it answered.
	refused := func() (bool, error) {
		err := cl.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+r.Name+"'"), err
	}
	var once sync.Once
	lift = func() {
		once.Do(func() {
			cl.Delete(ctx, binding)
			cl.Delete(ctx, policy)
			if err := waitRefused(refused, false); err != nil {
				tb.Errorf("testcluster: lift the refusal %q: %v", r.Message, err)
			}
		})
	}
	tb.Cleanup(lift)
	for _, o := range []client.Object{policy, binding} {
		if err := cl.Create(ctx, o); err != nil {
			tb.Fatalf("testcluster: refuse %s: %v", r.Message, err)
		}
	}
	made := time.Now()
	if err := waitRefused(refused, true); err != nil {
		tb.Fatalf("testcluster: refuse %s: %v", r.Message, err)
	}
	tb.Logf("testcluster: the API server refuses %s, %v after the policy was made", r.Message, time.Since(made).Round(time.Millisecond))
	return lift
}

// waitRefused waits up to refusalInForce until refused reports want, and
// says what the API server last answered when it gives up.
func waitRefused(refused func() (bool, error), want bool) error {
	start := time.Now()
	for {
		got, err := refused()
		if got == want {
			return nil
		}
		if time.Since(start) > refusalInForce {
			if want {
				return fmt.Errorf("the API server did not put the policy in force in %v: a dry-run create of its probe answered %v", refusalInForce, err)
			}
			return fmt.Errorf("the API server still refuses the policy's probe after %v: %v", refusalInForce, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
