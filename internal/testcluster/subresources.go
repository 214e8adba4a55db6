package testcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registerSubresources points the aggregated API v1.subresources.kubevirt.io
// at a server on localhost:port (KubeVirt's virt-api, or the stand-in),
// through a Service named service of type ExternalName localhost in
// namespace kubevirt, and waits until the apiserver routes to it. The
// server's certificate is not checked (insecureSkipTLSVerify: it names
// 127.0.0.1, not the Service). Do not use --enable-aggregator-routing:
// the apiserver refuses loopback endpoints.
func registerSubresources(ctx context.Context, cl client.Client, service string, port int32) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubeVirtNamespace}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: KubeVirtNamespace, Name: service},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}}}}
	if err := cl.Create(ctx, svc); err != nil {
		return err
	}
	apisvc := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.subresources.kubevirt.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "subresources.kubevirt.io", Version: "v1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: KubeVirtNamespace, Name: service, Port: &port},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 1000, VersionPriority: 15}}
	if err := cl.Create(ctx, apisvc); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got apiregistrationv1.APIService
		err := cl.Get(ctx, client.ObjectKey{Name: apisvc.Name}, &got)
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("APIService %s not available after 30s: %+v, %v", apisvc.Name, got.Status.Conditions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
