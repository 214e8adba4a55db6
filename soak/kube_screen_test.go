package soak

// The kube phase's shared screen: a VM console shared across the
// replicas through the kill of the one holding its screen.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// faultKillScreenOwner shares a VM's screen (the KubeVirt stand-in: one
// VNC client per VMI, its screen reached through the API server) across
// the replicas: the holder on replica 0, an invitee with control on 1,
// one view only and an admin on 2. The replica owning the screen (its
// Lease says which) is SIGKILLed: every viewer on the other replicas gets
// the screen back by reconnecting there, and the VMI never had two VNC
// clients (none kicked, none refused). The killed one comes back on its
// data dir.
func faultKillScreenOwner(t *testing.T, r *report, e *kubeEnv) {
	const area = "fault"
	ctx := context.Background()
	member, err := e.screenDesktop(ctx)
	if err != nil {
		r.add(area, "SIGKILL screen owner: a shared VM", false, "claimed, running", "%v", err)
		return
	}
	type viewer struct {
		who string
		rep int
	}
	viewers := []viewer{{"holder", 0}, {"shared-helper", 1}, {"shared-viewer", 2}, {"ops", 2}}
	for _, v := range viewers {
		s, err := openScreen(e.replicas[v.rep].URL, v.who, e.ns, member)
		if err != nil {
			r.add(area, "SIGKILL screen owner: 4 viewers on 3 replicas", false, "each reads the screen", "%s on replica %d: %v", v.who, v.rep, err)
			return
		}
		defer s.ws.Close()
	}
	before := e.kubevirt.Consoles(e.ns, member, "vnc")
	r.add(area, "SIGKILL screen owner: 4 viewers on 3 replicas", before.Opened == 1 && before.Kicked == 0 && before.Refused == 0,
		"1 VNC client of the VMI", "%+v", before)
	victim, err := e.screenOwner(ctx, member)
	if err != nil {
		r.add(area, "SIGKILL screen owner: its Lease", false, "names a replica", "%v", err)
		return
	}

	killed := time.Now()
	e.replicas[victim].kill()
	var failed []string
	var reopened []*vncSession
	defer func() {
		for _, s := range reopened {
			s.ws.Close()
		}
	}()
	for _, v := range viewers {
		if v.rep == victim {
			continue
		}
		if _, ok := eventually(60*time.Second, func() bool {
			s, err := openScreen(e.replicas[v.rep].URL, v.who, e.ns, member)
			if err == nil { // open until the end: they share the one screen
				reopened = append(reopened, s)
			}
			return err == nil
		}); !ok {
			failed = append(failed, v.who)
		}
	}
	r.add(area, "SIGKILL screen owner: viewers on the other replicas get the screen back", len(failed) == 0,
		"all within 60 s", "the last %s after the kill; failed: %v", time.Since(killed).Round(100*time.Millisecond), failed)
	after := e.kubevirt.Consoles(e.ns, member, "vnc")
	r.add(area, "SIGKILL screen owner: VNC clients of the VMI", after.Kicked == 0 && after.Refused == 0 && after.Opened == 2,
		"never 2 at once: 2 opened one after another (the killed owner's, the new one's), none kicked or refused", "%+v", after)

	start := time.Now()
	old := e.replicas[victim]
	restarted, err := launch(t, old.Data, "127.0.0.1:0", old.env)
	if err == nil {
		e.replicas[victim] = restarted
		err = e.claimRelease(ctx, restarted, "after-screen-kill")
	}
	r.add(area, "SIGKILL screen owner: restarted one serves", err == nil, "within 60 s", "%s %v", time.Since(start).Round(100*time.Millisecond), errOr(err, ""))
	call(ctx, e.replicas[(victim+1)%3].URL, "holder", "POST", e.releasePath(member), "")
}

// screenOwner returns the index of the replica that member's screen Lease
// names, by the identity each replica logs as it starts.
func (e *kubeEnv) screenOwner(ctx context.Context, member string) (int, error) {
	l, err := e.cluster.Client.CoordinationV1().Leases(e.ns).Get(ctx, "corral-vdi-screen."+e.ns+"."+member, metav1.GetOptions{})
	if err != nil {
		return -1, err
	}
	if l.Spec.HolderIdentity == nil {
		return -1, fmt.Errorf("the screen Lease names no one")
	}
	for i, p := range e.replicas {
		if log, _ := os.ReadFile(p.log.Name()); strings.Contains(string(log), "identity="+*l.Spec.HolderIdentity) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no replica logged the identity %q", *l.Spec.HolderIdentity)
}

// screenDesktop makes a VM pool of one whose VMI reports no IP (its
// screen is reached through the API server's vnc subresource, one client
// at a time), has holder claim it once it runs, and has holder invite
// shared-helper (control) and shared-viewer (view only).
func (e *kubeEnv) screenDesktop(ctx context.Context) (string, error) {
	admin, err := e.cluster.NewAdminClient()
	if err != nil {
		return "", err
	}
	if _, err := testcluster.CreateStoppedVM(ctx, admin, e.ns, "golden", nil); err != nil {
		return "", err
	}
	body := fmt.Sprintf(`{"namespace":%q,"name":"screen","kind":"vm","mode":"persistent","source":"golden","size":1}`, e.ns)
	if code, buf, err := call(ctx, e.replicas[0].URL, "ops", "POST", "/api/vdi/pools", body); code != 201 && code != 202 { // 202: its job makes the member
		return "", fmt.Errorf("create the VM pool: %d %.200s %v", code, buf, err)
	}
	var member string
	if _, ok := eventually(60*time.Second, func() bool {
		var vms kubevirtv1.VirtualMachineList
		admin.List(ctx, &vms, ctrlclient.InNamespace(e.ns), ctrlclient.MatchingLabels{"corral.dev/vdi-pool": "screen"})
		if len(vms.Items) == 1 {
			member = vms.Items[0].Name
		}
		return member != ""
	}); !ok {
		return "", fmt.Errorf("the VM pool's member did not appear in 60 s")
	}
	e.kubevirt.WithoutIPs(e.ns, member)
	claimed, ok := eventually(90*time.Second, func() bool {
		code, buf, _ := call(ctx, e.replicas[1].URL, "holder", "POST", "/api/vdi/pools/"+e.ns+"/screen/claim", "")
		d, _ := decode[desktop](buf)
		return code == 200 && d.Name == member && d.Power == "running"
	})
	if !ok {
		return "", fmt.Errorf("holder's claim of the running member: not in %s", claimed.Round(time.Second))
	}
	for _, inv := range []string{`{"user":"shared-helper","control":true}`, `{"user":"shared-viewer","control":false}`} {
		if code, buf, err := call(ctx, e.replicas[2].URL, "holder", "POST", "/api/vdi/desktops/"+e.ns+"/"+member+"/shares", inv); code != 201 && code != 200 {
			return "", fmt.Errorf("invite %s: %d %.200s %v", inv, code, buf, err)
		}
	}
	return member, nil
}

// openScreen opens ns/member's VNC console through base as user and reads
// a tile of its screen.
func openScreen(base, user, ns, member string) (*vncSession, error) {
	ws, err := dialConsole(base, user, "/ws/vnc/"+ns+"/"+member)
	if err != nil {
		return nil, err
	}
	c, err := newRFBClient(&wsStream{ws: ws})
	if err == nil {
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		err = c.tile(0, 0)
		ws.SetReadDeadline(time.Time{})
	}
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("vnc %s: %w", member, err)
	}
	return &vncSession{ws: ws, c: c}, nil
}
