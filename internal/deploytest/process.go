package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Process is a container of the Deployment as a process on this host
// runs it, the image's binary standing in for the image.
type Process struct {
	// Args follow the image's entrypoint (the binary): the container's.
	Args []string
	// Env is the container's environment, resolved with the Values.
	Env []string
	// root and mounts: the container's mount paths are under root here.
	root   string
	mounts []string
}

// HostPath returns where a path of the container is on this host: under
// the root folder if it lies in one of its mounts, else as it is. A
// socket's address, unix:PATH, moves the same way.
func (p *Process) HostPath(s string) string {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		return "unix:" + p.HostPath(path)
	}
	for _, m := range p.mounts {
		if s == m || strings.HasPrefix(s, strings.TrimSuffix(m, "/")+"/") {
			return filepath.Join(p.root, s)
		}
	}
	return s
}

// ContainerProcess returns the container name of d (the portal, or a
// native sidecar among the init containers) as a kubelet would start it,
// on this host: its environment resolved with v, its volumes (emptyDirs)
// made folders under root, and every argument or environment value
// naming a path under a mount moved under root with it. A command other
// than the image's entrypoint, or a kind of volume it cannot make, is an
// error.
func ContainerProcess(d *appsv1.Deployment, name string, v Values, root string) (*Process, error) {
	spec := d.Spec.Template.Spec
	c, err := container(d, name)
	if err != nil {
		return nil, err
	}
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("deploytest: container %s's command %q: want the image's entrypoint", name, c.Command)
	}
	volumes := map[string]corev1.Volume{}
	for _, vol := range spec.Volumes {
		volumes[vol.Name] = vol
	}
	p := &Process{root: root}
	for _, m := range c.VolumeMounts {
		vol, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("deploytest: volume mount %s: no volume of that name", m.Name)
		}
		if err := makeVolume(vol, filepath.Join(root, m.MountPath)); err != nil {
			return nil, err
		}
		p.mounts = append(p.mounts, m.MountPath)
	}
	env := containerEnv(c, v)
	for _, a := range c.Args {
		p.Args = append(p.Args, p.HostPath(a))
	}
	for _, e := range env {
		name, val, _ := strings.Cut(e, "=")
		if _, set := v.Override[name]; !set {
			val = p.HostPath(val)
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
