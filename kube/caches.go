package kube

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// CacheFillWait bounds how long StartCaches waits for the caches to fill.
// One that has not filled by then (the portal may not list there, or the
// API server is away) keeps trying with backoff while reads go to the API
// server, and Health says so.
const CacheFillWait = 30 * time.Second

// StartCaches fills the backend's caches of VirtualMachines, their
// VirtualMachineInstances and virt-launcher Pods, CT pools' ConfigMaps and
// their Pods (in its namespace, or all, label-selected) and
// keeps them current from watches until ctx ends: pages and the dashboard
// then read no API server, nor does the direct console path once the
// caches have seen its VMI, and waits for power, deletes and recreation
// follow watch events instead of polling. Without it every read goes to
// the API server. It returns once they are filled, or with an error saying
// which did not fill within FillWait; those keep trying.
func (c *Cluster) StartCaches(ctx context.Context) error {
	ws, err := c.VMs.startCache(ctx)
	if err != nil {
		return err
	}
	ws = append(ws, c.CTs.startCache(ctx)...)
	wait := c.FillWait
	if wait == 0 {
		wait = CacheFillWait
	}
	fill, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var errs []error
	for _, w := range ws {
		if err := w.waitFilled(fill); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Health returns why a cache does not serve reads (its watch is broken, or
// it never filled), nil when every one does or none was started.
func (c *Cluster) Health() error {
	return errors.Join(c.VMs.cache.health(), c.VMs.addrs.vmis.health(), c.VMs.addrs.launchers.health(),
		c.CTs.configs.health(), c.CTs.podCache.health())
}

// where names namespace for messages.
func where(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}

// startCache starts the VM cache. Without KubeVirt installed it keeps
// listing with backoff, reads answer that there is none without asking,
// and it fills once KubeVirt is installed.
func (v *VMs) startCache(ctx context.Context) ([]*watched, error) {
	sel := vdi.LabelPool
	req := func(o *metav1.ListOptions) *metav1.ListOptions { o.LabelSelector = sel; return o }
	w := newWatched("VirtualMachines labelled "+sel+" in "+where(v.namespace), &kubevirtv1.VirtualMachine{}, vdi.LabelPool,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			var list kubevirtv1.VirtualMachineList
			err := v.rest.Get().NamespaceIfScoped(v.namespace, v.namespace != "").Resource("virtualmachines").
				VersionedParams(req(&o), metav1.ParameterCodec).Do(ctx).Into(&list)
			if err != nil {
				return nil, err
			}
			return &list, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return v.rest.Get().NamespaceIfScoped(v.namespace, v.namespace != "").Resource("virtualmachines").
				VersionedParams(req(&o), metav1.ParameterCodec).Watch(ctx)
		})
	w.start(ctx)
	v.cache = w
	return append([]*watched{w}, v.addrs.startCache(ctx, v.namespace)...), nil
}

// startCache starts the caches the direct console path reads: the
// VirtualMachineInstances (one per running VM, so bounded by what the
// nodes run; KubeVirt copies no pool label onto them unless a golden VM's
// template has it, so they are not selected) and the virt-launcher Pods
// (labelled kubevirt.io=virt-launcher), indexed by the VMI UID they run.
func (a *addresses) startCache(ctx context.Context, namespace string) []*watched {
	a.vmis = newWatched("VirtualMachineInstances in "+where(namespace), &kubevirtv1.VirtualMachineInstance{}, vdi.LabelPool,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			var list kubevirtv1.VirtualMachineInstanceList
			err := a.kv.Get().NamespaceIfScoped(namespace, namespace != "").Resource("virtualmachineinstances").
				VersionedParams(&o, metav1.ParameterCodec).Do(ctx).Into(&list)
			if err != nil {
				return nil, err
			}
			return &list, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return a.kv.Get().NamespaceIfScoped(namespace, namespace != "").Resource("virtualmachineinstances").
				VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
		})
	a.launchers = newWatched("virt-launcher Pods labelled "+labelLauncher+" in "+where(namespace), &corev1.Pod{}, labelCreatedBy,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labelLauncher
			return a.core.Pods(namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labelLauncher
			return a.core.Pods(namespace).Watch(ctx, o)
		})
	ws := []*watched{a.vmis, a.launchers}
	for _, w := range ws {
		w.start(ctx)
	}
	return ws
}

// startCache starts the caches of CT pools' ConfigMaps and their Pods.
func (c *CTs) startCache(ctx context.Context) []*watched {
	core := c.cs.CoreV1()
	c.configs = newWatched("ConfigMaps labelled "+LabelCTPool+" in "+where(c.namespace), &corev1.ConfigMap{}, LabelCTPool,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = LabelCTPool
			return core.ConfigMaps(c.namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = LabelCTPool
			return core.ConfigMaps(c.namespace).Watch(ctx, o)
		})
	c.podCache = newWatched("Pods labelled "+vdi.LabelPool+" in "+where(c.namespace), &corev1.Pod{}, vdi.LabelPool,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = vdi.LabelPool
			return core.Pods(c.namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = vdi.LabelPool
			return core.Pods(c.namespace).Watch(ctx, o)
		})
	ws := []*watched{c.configs, c.podCache}
	for _, w := range ws {
		w.start(ctx)
	}
	return ws
}
