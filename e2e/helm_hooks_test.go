package e2e

import (
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// TestHelmTestHooks runs `helm test`'s hook Pods of the chart (its
// defaults) as a kubelet would run their one container: each hook's
// command with its environment, in a network namespace of its own (a Pod
// is another host on the network, never the portal's loopback), against
// a portal started with the environment the chart's Deployment sets, on
// the kube backend of a real kube-apiserver. The only stand-in is the
// Service: PORTAL, the Service's name, becomes the portal's address. Both
// hooks pass. The sign-in hook run from the portal's own loopback (where
// tailscale serve's identity headers are believed) fails, saying a
// spoofed header got in: the hook can tell.
func TestHelmTestHooks(t *testing.T) {
	ch, err := deploytest.RenderChart(filepath.Join("..", "deploy", "helm", "corral-vdi-portal"), "corral-vdi", "corral-vdi", nil)
	must(t, err)
	d, err := deploytest.Deployment(ch.Objects)
	must(t, err)
	n := testnet.New(t)
	c := testcluster.MustStart(t)
	ns := c.Namespace(t)
	applyNamespacedRBAC(t, c, ns)
	env, err := deploytest.PortalEnv(d, deploytest.Values{
		Secrets: map[string]string{"corral-vdi-secrets/session-keys": randomKey(t), "corral-vdi-secrets/token-keys": randomKey(t),
			"corral-vdi-secrets/peer-secret": randomKey(t)},
		Fields:   map[string]string{"metadata.namespace": "corral-vdi"},
		Override: map[string]string{"HOME": t.TempDir(), "CORRAL_VDI_PEER_URL": "", "CORRAL_VDI_POOL_NAMESPACES": ns},
	})
	must(t, err)
	env = append(env, "KUBECONFIG="+testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)))
	// On every address, as in a pod: the hooks reach it on the host's
	// end of the test network, the loopback row on 127.0.0.1.
	p := startPortalIn(t, t.TempDir(), nil, append(env, "CORRAL_VDI_LISTEN=0.0.0.0:0")...)
	u, err := url.Parse(p.URL)
	must(t, err)
	onNet, onLoopback := "http://"+net.JoinHostPort(n.Host, u.Port()), "http://"+net.JoinHostPort("127.0.0.1", u.Port())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("portal log:\n%s", p.Log())
		}
	})

	hooks := map[string]corev1.Pod{}
	for _, u := range ch.Hooks {
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
}
