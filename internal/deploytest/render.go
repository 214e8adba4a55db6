// Package deploytest renders deploy/ with kustomize's own Go API, as
// `kubectl apply -k` would, for tests that apply the manifests to a real
// API server or run the portal with the environment its Deployment sets.
package deploytest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Render builds the kustomization in dir and returns its objects in
// kustomize's order.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("deploytest: kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("deploytest: %s: %w", r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, fmt.Errorf("deploytest: %s: %w", r.CurId(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Deployment returns the portal's Deployment among objs.
func Deployment(objs []*unstructured.Unstructured) (*appsv1.Deployment, error) {
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == "corral-vdi-portal" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				return nil, fmt.Errorf("deploytest: Deployment: %w", err)
			}
			return &d, nil
		}
	}
	return nil, fmt.Errorf("deploytest: no Deployment corral-vdi-portal")
}

// Values resolve what a pod's environment takes from the cluster.
type Values struct {
	// Secrets maps "secret/key" to its value; a key not in it is left
	// out, as an optional secretKeyRef would be.
	Secrets map[string]string
	// Fields maps a fieldRef path (metadata.namespace) to its value.
	Fields map[string]string
	// Override replaces literal values by name (e.g. CORRAL_VDI_LISTEN
	// on a test port).
	Override map[string]string
}

// PortalEnv returns the container "portal"'s environment in d as NAME=value
// pairs, resolved with v; resource fields are left out.
func PortalEnv(d *appsv1.Deployment, v Values) ([]string, error) {
	c, err := container(d, "portal")
	if err != nil {
		return nil, err
	}
	return containerEnv(c, v), nil
}

// container returns d's container (or init container, a native sidecar)
// of that name.
func container(d *appsv1.Deployment, name string) (*corev1.Container, error) {
	spec := &d.Spec.Template.Spec
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i], nil
			}
		}
	}
	return nil, fmt.Errorf("deploytest: Deployment %s has no container %s", d.Name, name)
}

// containerEnv returns c's environment as NAME=value pairs, resolved with
// v; resource fields are left out.
func containerEnv(c *corev1.Container, v Values) []string {
	var env []string
	for _, e := range c.Env {
		val, ok := e.Value, true
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.SecretKeyRef != nil:
			val, ok = v.Secrets[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom.FieldRef != nil:
			val, ok = v.Fields[e.ValueFrom.FieldRef.FieldPath]
		default:
			ok = false
		}
		if o, set := v.Override[e.Name]; set {
			val, ok = o, true
		}
		if ok {
			env = append(env, e.Name+"="+val)
		}
	}
	return env
}
