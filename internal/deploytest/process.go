package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Process is the Deployment's container "portal" as a process on this
// host runs it, the image's binary standing in for the image.
type Process struct {
	// Args follow the image's entrypoint (the binary): the container's.
	Args []string
	// Env is the container's environment, as PortalEnv resolves it.
	Env []string
}

// ContainerProcess returns the container "portal" of d as a kubelet would
// start it, on this host: its environment resolved with v, its volumes
// (emptyDirs) made empty folders under root, and every argument or
// environment value naming a path under a mount moved under root with
// it. A command other than the image's entrypoint, or a kind of volume it
// cannot make, is an error.
func ContainerProcess(d *appsv1.Deployment, v Values, root string) (*Process, error) {
	spec := d.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "portal" {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("deploytest: Deployment %s has no container portal", d.Name)
	}
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("deploytest: container portal's command %q: want the image's entrypoint", c.Command)
	}
	volumes := map[string]corev1.Volume{}
	for _, vol := range spec.Volumes {
		volumes[vol.Name] = vol
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		vol, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("deploytest: volume mount %s: no volume of that name", m.Name)
		}
		if err := makeVolume(vol, filepath.Join(root, m.MountPath)); err != nil {
			return nil, err
		}
		mounts = append(mounts, m.MountPath)
	}
	moved := func(s string) string {
		for _, m := range mounts {
			if s == m || strings.HasPrefix(s, strings.TrimSuffix(m, "/")+"/") {
				return filepath.Join(root, s)
			}
		}
		return s
	}
	env, err := PortalEnv(d, v)
	if err != nil {
		return nil, err
	}
	p := &Process{}
	for _, a := range c.Args {
		p.Args = append(p.Args, moved(a))
	}
	for _, e := range env {
		name, val, _ := strings.Cut(e, "=")
		if _, set := v.Override[name]; !set {
			val = moved(val)
		}
		p.Env = append(p.Env, name+"="+val)
	}
	return p, nil
}

// makeVolume makes vol's folder at dir.
func makeVolume(vol corev1.Volume, dir string) error {
	if vol.EmptyDir == nil {
		return fmt.Errorf("deploytest: volume %s: a kind ContainerProcess does not make (it makes emptyDirs)", vol.Name)
	}
	return os.MkdirAll(dir, 0o755)
}
