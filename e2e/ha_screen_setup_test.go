package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// haScreen is a desktop's screen in the HA install: three portal
// processes started as deploy/ starts them (screen links on by default
// with the Secret's peer secret), the kube backend on a real
// kube-apiserver, and the KubeVirt stand-in playing virt-handler's
// one-client rule on the member's vnc subresource (its VMI has no IP, so
// the screen is reached through the API server) and counting its VNC
// clients. Alice holds the member.
type haScreen struct {
	standIn    *testcluster.KubeVirtStandIn
	admin      client.Client
	ns, member string
	reps       map[string]*haReplica // a, b and c
	secrets    map[string]string
	env        []string
}

// startHAScreen starts an haScreen, its replicas with env beside the
// install's; the replicas' logs are in the test's output when it fails.
func startHAScreen(t *testing.T, env ...string) *haScreen {
	t.Helper()
	c := testcluster.MustStart(t)
	h := &haScreen{standIn: c.StartKubeVirtStandIn(t), admin: c.AdminClient(t), ns: c.Namespace(t), reps: map[string]*haReplica{}}
	applyNamespacedRBAC(t, c, h.ns)
	kubeconfig := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	h.secrets = deploySecrets(t)
	h.env = append(append(haEnv(t, h.secrets, kubeconfig), "CORRAL_VDI_POOL_NAMESPACES="+h.ns), env...)
	for _, name := range []string{"a", "b", "c"} {
		h.reps[name] = startReplica(t, name, t.TempDir(), "127.0.0.1:0", h.env)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range h.reps {
				t.Logf("replica %s's log:\n%s", r.name, r.p.Log())
			}
		}
	})

	// A pool of one VM whose VMI reports no IP: its screen is reached
	// through the API server's vnc subresource, one client at a time.
	testcluster.StoppedVM(t, h.admin, h.ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"scr","kind":"vm","mode":"persistent","source":"golden","size":1}`, h.ns)
	var perr apiError
	if code := h.reps["a"].p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create pool: %d %+v", code, perr)
	}
	waitFor(t, 60*time.Second, "the pool's member VM", func() bool {
		var vms kubevirtv1.VirtualMachineList
		h.admin.List(context.Background(), &vms, client.InNamespace(h.ns), client.MatchingLabels{"corral.dev/vdi-pool": "scr"})
		if len(vms.Items) == 1 {
			h.member = vms.Items[0].Name
		}
		return h.member != ""
	})
	h.standIn.WithoutIPs(h.ns, h.member)
	var d desktop
	waitFor(t, 90*time.Second, "alice's claim of the running member", func() bool {
		code := h.reps["b"].p.API(t, "alice", "POST", "/api/vdi/pools/"+h.ns+"/scr/claim", &d)
		return code == 200 && d.Name == h.member && d.Power == "running"
	})
	return h
}

// open opens user's VNC console of the member on r, as a raw RFB client.
func (h *haScreen) open(t *testing.T, r *haReplica, user string) *rfbViewer {
	t.Helper()
	ws, res, err := dialWS(r.p, user, "/ws/vnc/"+h.ns+"/"+h.member, r.p.URL)
	if err != nil {
		t.Fatalf("%s's console on %s: %v (%v)", user, r.name, err, status(res))
	}
	t.Cleanup(func() { ws.Close() })
	return newRFBViewer(t, ws)
}

// sameScreen waits until every viewer in vs sees one screen, and returns
// its hash.
func sameScreen(t *testing.T, what string, vs map[string]*rfbViewer) string {
	t.Helper()
	var hashes map[string]string
	for end := time.Now().Add(testwait.D(15 * time.Second)); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		hashes = map[string]string{}
		seen := map[string]bool{}
		for who, v := range vs {
			h, err := v.screen(t)
			if err != nil {
				t.Fatalf("%s: %s's screen: %v", what, who, err)
			}
			hashes[who], seen[h] = h, true
		}
		if len(seen) == 1 {
			for _, h := range hashes {
				return h
			}
		}
	}
	t.Fatalf("%s: the viewers see different screens: %v", what, hashes)
	return ""
}
