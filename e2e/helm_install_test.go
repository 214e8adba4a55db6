package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	dist "github.com/corral-dev/corral-vdi-portal/internal/release"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// TestHelm_InstallFromOCI is an operator's Helm install, then a user's
// first morning on it. The release's chart (as make release packs it) is
// pushed to an OCI registry and installed from there with Helm's own
// install action on a real kube-apiserver, with the values an operator
// sets (an admin, a pool namespace the chart makes) and the Secret
// docs/operating.md has them create. The portal binary then runs as the
// Deployment Helm installed says, as a kubelet would start its pod: the
// container's args and environment (the Secret's keys and the pod's
// fields resolved from the cluster), its volumes as folders, and the
// token of the ServiceAccount the chart made, so that what the portal may
// do is what the chart's RBAC grants. The release has the encoder image,
// so the chart runs its encoder sidecar by default, pinned by digest:
// the sidecar runs first as its container says, until its startup probe
// passes, and a screen sent where the portal's h264 points comes back
// as H.264. The portal must be ready by its own readiness probe. `helm test`'s hook Pods, as the release keeps them,
// then run as a kubelet would run their one container: each hook's
// command with its environment, in a network namespace of its own (a Pod
// is another host on the network, never the portal's loopback); the only
// stand-in is the Service (PORTAL, its name, becomes the portal's
// address). Both pass; the sign-in hook run from the portal's own
// loopback (where tailscale serve's identity headers are believed) fails,
// saying a spoofed header got in: the hook can tell. Last, the kustomize
// base's sign-in and claim (TestHA's): the admin makes a VM pool in the
// chart's pool namespace, alice claims a desktop and it runs, she
// releases it; and helm uninstall takes the release away.
func TestHelm_InstallFromOCI(t *testing.T) {
	const ns, pools = "corral-vdi", "corral-vdi-desktops"
	n := testnet.New(t)
	c := testcluster.MustStart(t)
	standIn := c.StartKubeVirtStandIn(t)
	admin := c.AdminClient(t)
	ctx := context.Background()
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}))
	keys := map[string]string{}
	for name, v := range deploySecrets(t) {
		keys[strings.TrimPrefix(name, "corral-vdi-secrets/")] = v
	}
	must(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corral-vdi-secrets"}, StringData: keys}))

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, c.WriteKubeconfig(kubeconfig, ""))
	encoderDigest := "sha256:" + strings.Repeat("c0", 32)
	in, err := deploytest.InstallFromOCI(deploytest.OCIInstall{Deploy: filepath.Join("..", "deploy"), Version: "v0.3.0",
		Image: "registry.example.com/vdi/portal", Digest: "sha256:" + strings.Repeat("cd", 32), EncoderDigest: encoderDigest,
		Kubeconfig: kubeconfig, Namespace: ns, Name: "corral-vdi", Dir: dir,
		Values: map[string]any{"auth": map[string]any{"admins": "ops"},
			"poolNamespaces": []any{map[string]any{"name": pools, "create": true}}}})
	must(t, err)
	t.Logf("helm install corral-vdi %s --version 0.3.0 -n %s", in.Ref, ns)
	p, h264 := startInstalledPortal(t, c, ns, dist.DefaultEncoderImage+"@"+encoderDigest)
	if h264 == "" {
		t.Error("the release's chart runs no encoder sidecar; want it on by default, as the release pins its image")
	} else {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := rfb.CheckH264(ctx, h264); err != nil {
			t.Errorf("a screen sent where the installed portal's h264 points (%s): %v; want an H.264 key frame from the encoder sidecar", h264, err)
		}
		cancel()
	}
	u, err := url.Parse(p.URL)
	must(t, err)
	onNet, onLoopback := "http://"+net.JoinHostPort(n.Host, u.Port()), "http://"+net.JoinHostPort("127.0.0.1", u.Port())

	hooks := map[string]corev1.Pod{}
	for _, u := range in.Hooks {
		var pod corev1.Pod
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod))
		hooks[strings.TrimPrefix(pod.Name, "corral-vdi-portal-test-")] = pod
	}
	if len(hooks) != 2 || hooks["readyz"].Name == "" || hooks["signin"].Name == "" {
		t.Fatalf("the chart's helm test hooks: %v; want readyz and signin", hooks)
	}
	// run runs pod's container as the kubelet would, in namespace netns
	// ("" for the host's) with the Service's name resolved to portal, and
	// returns its output and exit error.
	run := func(pod corev1.Pod, netns, portal string) (string, error) {
		t.Helper()
		ctr := pod.Spec.Containers[0]
		args := ctr.Command
		if netns != "" {
			args = append([]string{"ip", "netns", "exec", netns}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		for _, e := range ctr.Env {
			if e.Name == "PORTAL" {
				if !strings.HasPrefix(e.Value, "http://corral-vdi-portal.corral-vdi.svc") {
					t.Fatalf("the hook's PORTAL %q; want the Service's name", e.Value)
				}
				e.Value = portal
			}
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, want := range map[string]string{"readyz": "readyz: ready", "signin": "signin: ok"} {
		if out, err := run(hooks[name], n.NS, onNet); err != nil || !strings.Contains(out, want) {
			t.Errorf("helm test hook %s: %v\n%s\nwant it to pass saying %q", name, err, out, want)
		}
	}
	if out, err := run(hooks["signin"], "", onLoopback); err == nil || !strings.Contains(out, "spoofed identity header got 200") {
		t.Errorf("the signin hook from the portal's loopback (headers believed there): %v\n%s\nwant it to fail on the believed header", err, out)
	}

	// The kustomize base's sign-in and claim, on what Helm installed.
	booted := make(chan string, 8)
	standIn.OnBoot(func(_, vm, _, _, _ string) {
		select {
		case booted <- vm:
		default:
		}
	})
	testcluster.StoppedVM(t, admin, pools, "golden", nil)
	var perr apiError
	body := fmt.Sprintf(`{"namespace":%q,"name":"helm","kind":"vm","mode":"persistent","source":"golden","size":1}`, pools)
	if code := p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("the admin creates a pool in the chart's pool namespace: %d %+v", code, perr)
	}
	d := p.claimRunning(t, "alice", pools, "helm")
	var mine []desktop
	if code := p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); code != 200 || len(mine) != 1 || mine[0].Name != d.Name || mine[0].Holder != "alice" {
		t.Fatalf("alice's desktops after her claim: %d %+v; want %s held by her", code, mine, d.Name)
	}
	select {
	case vm := <-booted:
		if vm != d.Name {
			t.Errorf("the VM that booted: %s; want alice's %s", vm, d.Name)
		}
	case <-time.After(time.Minute):
		t.Errorf("alice's desktop %s runs but no guest booted", d.Name)
	}
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/"+pools+"/"+d.Name+"/release", nil); code != 200 {
		t.Fatalf("alice releases %s: %d", d.Name, code)
	}
	p.Stop(t)
	must(t, in.Uninstall())
	var dep appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corral-vdi-portal"}, &dep); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, the portal's Deployment: %v; want it gone", err)
	}
}

// startInstalledPortal starts the portal binary as the Deployment Helm
// installed in ns says, as a kubelet would start its pod (on this host,
// on every address as in a pod, the Service's port a free one): first
// its encoder sidecar where it has one, which must pull encoder, until
// its startup probe passes; then its container's args and environment,
// the Secret's keys and the pod's namespace read from the cluster, its
// emptyDirs as folders, and a token of its ServiceAccount, which must be
// there. It returns the portal once its readiness probe answers 200, and
// the portal's h264 as it runs ("" without a sidecar).
func startInstalledPortal(t *testing.T, c *testcluster.Cluster, ns, encoder string) (*Portal, string) {
	t.Helper()
	admin := c.AdminClient(t)
	ctx := context.Background()
	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corral-vdi-portal"}, &d); err != nil {
		t.Fatalf("the Deployment helm install made: %v", err)
	}
	spec := d.Spec.Template.Spec
	var sa corev1.ServiceAccount
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.ServiceAccountName}, &sa); err != nil {
		t.Fatalf("the Deployment's ServiceAccount %s: %v", spec.ServiceAccountName, err)
	}
	secrets := map[string]string{}
	for _, ctr := range spec.Containers {
		for _, e := range ctr.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			var s corev1.Secret
			ref := e.ValueFrom.SecretKeyRef
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &s); err == nil {
				if v, ok := s.Data[ref.Key]; ok {
					secrets[ref.Name+"/"+ref.Key] = string(v)
				}
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	root := t.TempDir()
	for _, ctr := range spec.InitContainers {
		if ctr.Name == "encoder" {
			if ctr.Image != encoder {
				t.Errorf("the installed Deployment's encoder sidecar pulls %s; want %s, pinned by the release", ctr.Image, encoder)
			}
			startInstalledSidecar(t, &d, ctr, root)
		}
	}
	proc, err := deploytest.ContainerProcess(&d, "portal", deploytest.Values{
		Secrets: secrets,
		Fields:  map[string]string{"metadata.namespace": ns},
		Override: map[string]string{
			// On every address as in a pod, on a free port; the peer URL
			// ($(POD_IP):8080) follows it, unused with one replica.
			"CORRAL_VDI_LISTEN": "0.0.0.0:0", "CORRAL_VDI_PEER_URL": "",
		},
	}, root)
	must(t, err)
	env := append(proc.Env, "KUBECONFIG="+testcluster.WriteKubeconfig(t, c.ServiceAccount(t, ns, sa.Name)))
	t.Logf("the installed Deployment's container: args %q, environment %s", proc.Args, strings.Join(redact(env), " "))
	var data string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "CORRAL_VDI_DATA_DIR="); ok {
			data = v
		}
	}
	p := startPortalArgs(t, binary, data, nil, proc.Args, env...)
	probe := spec.Containers[0].ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("the installed Deployment's readiness probe %+v; want an HTTP GET", probe)
	}
	waitFor(t, 30*time.Second, "the portal ready by its readiness probe "+probe.HTTPGet.Path, func() bool {
		return get(t, p.URL+probe.HTTPGet.Path, nil) == 200
	})
	h264 := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "CORRAL_VDI_H264="); ok {
			h264 = v
		}
	}
	return p, h264
}

// startInstalledSidecar runs d's native sidecar ctr (an init container
// that keeps running) as a kubelet would before the pod's containers:
// the portal binary standing in for its image, with its args and
// environment, its emptyDirs the folders under root the portal shares;
// it returns once the container's startup probe (an exec) passes there.
// The wait is longer than the probe's budget: this host's GStreamer has
// far more plugins to scan at the sidecar's first start than the image.
func startInstalledSidecar(t *testing.T, d *appsv1.Deployment, ctr corev1.Container, root string) {
	t.Helper()
	if ctr.RestartPolicy == nil || *ctr.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("init container %s: restartPolicy %v; want Always (a native sidecar)", ctr.Name, ctr.RestartPolicy)
	}
	proc, err := deploytest.ContainerProcess(d, ctr.Name, deploytest.Values{}, root)
	must(t, err)
	var log strings.Builder
	cmd := exec.Command(binary, proc.Args...)
	cmd.Env = append(os.Environ(), proc.Env...)
	cmd.Stdout, cmd.Stderr = &log, &log
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the %s sidecar's log:\n%s", ctr.Name, log.String())
		}
	})
	t.Logf("the installed Deployment's %s sidecar: args %q, environment %q", ctr.Name, proc.Args, proc.Env)
	probe := ctr.StartupProbe
	if probe == nil || probe.Exec == nil {
		t.Fatalf("the %s sidecar's startup probe %+v; want an exec", ctr.Name, probe)
	}
	// The probe's command, its paths under root as the mounts are.
	var args []string
	for _, a := range probe.Exec.Command {
		args = append(args, proc.HostPath(a))
	}
	waitFor(t, 90*time.Second, "the "+ctr.Name+" sidecar's startup probe "+strings.Join(probe.Exec.Command, " "), func() bool {
		return exec.Command(args[0], args[1:]...).Run() == nil
	})
}
