package kube_test

import (
	"context"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctSetup is a namespace with a stand-in kubelet, the portal's
// ServiceAccount bound to deploy/rbac.yaml, and vdi.Service over
// kube.Cluster as that ServiceAccount.
type ctSetup struct {
	c       *testcluster.Cluster
	kubelet *testcluster.Kubelet
	ns      string
	ctx     context.Context
	svc     *vdi.Service
	back    *kube.Cluster
	exec    *kube.ExecPath
	root    vdi.Identity
	leases  vdi.Leases
}

func newCTSetup(t *testing.T) *ctSetup {
	t.Helper()
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	kubelet := c.StartKubelet(t)
	sa := c.PortalServiceAccount(t)
	leases := mustLeases(t, sa)
	back, err := kube.NewCluster(kube.Config{REST: sa, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := kube.NewExecPath(kube.Config{REST: sa})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(back, leases)
	t.Cleanup(svc.StopJobs) // a reset a release left going ends with the test
	return &ctSetup{c: c, kubelet: kubelet, ns: c.Namespace(t), ctx: context.Background(), svc: svc, back: back, exec: exec,
		root: vdi.Identity{Login: "root", Admin: true}, leases: leases}
}

// configMap declares CT pool name with data, as an admin would with kubectl.
func (s *ctSetup) configMap(t *testing.T, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "pool-" + name, Labels: map[string]string{kube.LabelCTPool: name}}, Data: data}
	if _, err := s.c.Client.CoreV1().ConfigMaps(s.ns).Create(s.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *ctSetup) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return pod
}

func (s *ctSetup) members(t *testing.T, pool string) []vdi.Member {
	t.Helper()
	ms, err := s.back.Members(s.ctx, s.ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func names(ms []vdi.Member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

// expect reads conn until its output contains want.
func expect(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), want) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("terminal output %q, then %v; want %q in it", got, err, want)
		}
	}
}

// TestCTPoolLifecycle runs a CT pool declared in a ConfigMap through
// vdi.Service on kube.Cluster, as the portal's ServiceAccount: claims start
// Pods, the terminal runs through pods/exec and takes resizes, Recreate
// makes a new Pod, resizes keep claimed members, delete cleans up.
func TestCTPoolLifecycle(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.configMap(t, "desk", map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "2",
		kube.CTKeyShell: `["/bin/sh"]`, kube.CTKeyPolicy: `{"disconnectGrace": "1m"}`,
		kube.CTKeyResources: `{"requests": {"cpu": "100m", "memory": "64Mi"}}`})

	p, err := s.back.Pool(ctx, ns, "desk")
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != vdi.KindCT || p.Mode != vdi.ModeEphemeral || p.Size != 2 || p.Source != "corral.test/shell" || p.Policy.DisconnectGrace != time.Minute {
		t.Errorf("pool = %+v; want 2 ephemeral ct members of corral.test/shell with a 1m grace", p)
	}
	if got := names(s.members(t, "desk")); got != "desk-1,desk-2" {
		t.Fatalf("members %s; want desk-1,desk-2", got)
	}
	for _, m := range s.members(t, "desk") {
		if m.Power != vdi.PowerStopped {
			t.Errorf("%s is %s before any claim; want stopped (no Pod yet)", m.Name, m.Power)
		}
	}

	a, err := s.svc.Claim(ctx, vdi.Identity{Login: "alice"}, ns, "desk")
	if err != nil {
		t.Fatalf("alice's claim: %v", err)
	}
	if a.Power != vdi.PowerRunning || !slices.Equal(a.Protocols, []vdi.Protocol{vdi.ProtocolTerminal}) {
		t.Fatalf("alice's desktop %s is %s with %v; want running with a terminal", a.Name, a.Power, a.Protocols)
	}
	pod := s.pod(t, a.Name)
	if pod == nil || pod.Labels[vdi.LabelPool] != "desk" || pod.Spec.Containers[0].Image != "corral.test/shell" ||
		pod.Spec.Containers[0].Resources.Requests.Cpu().String() != "100m" || *pod.Spec.AutomountServiceAccountToken {
		t.Fatalf("alice's Pod = %+v; want labelled into desk, from corral.test/shell, 100m CPU, no ServiceAccount token", pod)
	}
	// Fenced as Pod Security "restricted" asks, but for the image's uid
	// (no runAsUser in this pool), and with no egress label.
	if sc, psc := pod.Spec.Containers[0].SecurityContext, pod.Spec.SecurityContext; sc == nil || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || pod.Labels[kube.LabelEgress] != "" {
		t.Errorf("alice's Pod security %+v / %+v, labels %v; want all capabilities dropped, no escalation, RuntimeDefault seccomp, no egress", sc, psc, pod.Labels)
	}

	t.Run("Terminal", func(t *testing.T) {
		if _, err := s.svc.Dial(ctx, a.Ref(), vdi.ProtocolTerminal); vdi.ErrorCode(err) != vdi.EUnavailable {
			t.Errorf("direct terminal without a terminalPort: %v; want an error the next path may mend", err)
		}
		if _, err := s.exec.Dial(ctx, a.Ref(), vdi.ProtocolVNC); err == nil {
			t.Error("exec path gave a VNC console")
		}
		// Warm the client's connection pool, so that goroutines counted
		// below are the session's.
		if _, err := s.exec.Dial(ctx, vdi.Ref{Namespace: ns, Name: "desk-9"}, vdi.ProtocolTerminal); err == nil {
			t.Fatal("exec into a member with no Pod succeeded")
		}
		before := execGoroutines()
		conn, err := s.exec.Dial(ctx, a.Ref(), vdi.ProtocolTerminal)
		if err != nil {
			t.Fatalf("terminal through pods/exec: %v", err)
		}
		if open := execGoroutines(); open <= before {
			t.Errorf("%d goroutines of exec sessions with the terminal open, %d before: the count would not see one left behind", open, before)
		}
		defer func() {
			conn.Close()
			deadline := time.Now().Add(5 * time.Second)
			for execGoroutines() > before {
				if time.Now().After(deadline) {
					t.Errorf("%d goroutines of exec sessions after closing the terminal; %d before opening it", execGoroutines(), before)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		if _, err := conn.Write([]byte("echo hi-$((6*7))\n")); err != nil {
			t.Fatal(err)
		}
		expect(t, conn, "hi-42")
		rz, ok := conn.(relay.Resizer)
		if !ok {
			t.Fatalf("%T is no relay.Resizer", conn)
		}
		if err := rz.Resize(101, 33); err != nil {
			t.Fatal(err)
		}
		// The resize travels on its own stream: ask until the pty has it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			conn.Write([]byte("stty size | sed 's/ /x/'\n"))
			conn.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 4096)
			n, _ := conn.Read(buf)
			if strings.Contains(string(buf[:n]), "33x101") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stty size after resizing to 101x33: %q", buf[:n])
			}
		}
		conn.SetReadDeadline(time.Time{})
	})

	t.Run("Recreate", func(t *testing.T) {
		other := vdi.Ref{Namespace: ns, Name: "desk-1"}
		if a.Name == other.Name {
			other.Name = "desk-2"
		}
		if err := s.svc.Start(ctx, s.root, other); err != nil {
			t.Fatalf("start %s: %v", other.Name, err)
		}
		before := s.pod(t, other.Name)
		if err := s.svc.Recreate(ctx, s.root, a.Ref()); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("recreating alice's claimed desktop: %v; want EConflict", err)
		}
		if err := s.svc.Recreate(ctx, s.root, other); err != nil {
			t.Fatalf("recreate %s: %v", other.Name, err)
		}
		after := s.pod(t, other.Name)
		if after == nil || after.UID == before.UID {
			t.Fatalf("Pod of %s after Recreate: %v; want a new one (old UID %s)", other.Name, after, before.UID)
		}
	})

	t.Run("Resize", func(t *testing.T) {
		size := func(n int) error { return s.svc.UpdatePool(ctx, s.root, ns, "desk", vdi.PoolUpdate{Size: &n}) }
		if err := size(4); err != nil {
			t.Fatalf("grow to 4: %v", err)
		}
		if got := names(s.members(t, "desk")); got != "desk-1,desk-2,desk-3,desk-4" {
			t.Fatalf("members after growing to 4: %s", got)
		}
		if s.pod(t, "desk-4") == nil {
			t.Error("an ephemeral pool's new member has no warm Pod")
		}
		if _, err := s.svc.Assign(ctx, s.root, vdi.Ref{Namespace: ns, Name: "desk-4"}, "carol"); err != nil {
			t.Fatalf("assign desk-4 to carol: %v", err)
		}
		if err := size(1); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("shrinking to 1 with two claimed members: %v; want EConflict", err)
		}
		if err := size(2); err != nil {
			t.Fatalf("shrink to 2: %v", err)
		}
		want := []string{a.Name, "desk-4"}
		slices.Sort(want)
		if got := names(s.members(t, "desk")); got != strings.Join(want, ",") {
			t.Fatalf("members after shrinking to 2: %s; want alice's and carol's: %v", got, want)
		}
		for _, n := range []string{"desk-1", "desk-2", "desk-3"} {
			if !slices.Contains(want, n) && s.pod(t, n) != nil {
				t.Errorf("Pod %s of a dropped member is still there", n)
			}
		}
		if p, err := s.back.Pool(ctx, ns, "desk"); err != nil || p.Size != 2 {
			t.Errorf("pool after shrinking: %+v, %v; want size 2", p, err)
		}
		cm, err := s.c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "pool-desk", metav1.GetOptions{})
		if err != nil || cm.Data[kube.CTKeyMembers] != strings.Join(want, ",") || cm.Data[kube.CTKeySize] != "2" {
			t.Errorf("ConfigMap after a shrink with gaps: %v, %v; want size 2 and members %v", cm.Data, err, want)
		}
		// A claim made after the caller looked at the claims: the backend
		// takes each member's Lease before removing it, so it finds out.
		if err := s.back.ResizePool(ctx, ns, "desk", 1, func(string) bool { return false }); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("shrinking with a stale view of the claims: %v; want EConflict", err)
		}
		if got := names(s.members(t, "desk")); got != strings.Join(want, ",") {
			t.Errorf("members after a refused shrink: %s; want %v", got, want)
		}
		if l, err := s.leases.Get(ctx, a.Ref()); err != nil || l.Holder != "alice" {
			t.Errorf("alice's Lease after a refused shrink: %+v, %v", l, err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		if err := s.svc.DeletePool(ctx, s.root, ns, "desk"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("deleting a pool with claimed members: %v; want EConflict", err)
		}
		ds, err := s.svc.Desktops(ctx, s.root, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Namespace == ns && d.Holder != "" {
				before := s.pod(t, d.Name)
				if err := s.svc.Release(ctx, s.root, d.Ref(), "test"); err != nil {
					t.Fatalf("force-release %s: %v", d.Name, err)
				}
				// Ephemeral: the member is recreated, a fresh Pod waits
				// (the release answers while the old Pod goes).
				waitClaimGone(t, s.leases, d.Ref())
				if after := s.pod(t, d.Name); after == nil || after.UID == before.UID {
					t.Errorf("Pod of %s after its release: %v; want a new one (old UID %s)", d.Name, after, before.UID)
				}
			}
		}
		// Leave a Lease behind, as a crash between a release's steps would.
		if _, err := s.leases.Create(ctx, &vdi.Lease{Namespace: ns, Member: a.Name, Pool: "desk", Holder: "ghost",
			AcquireTime: time.Now().Add(-2 * time.Hour), RenewTime: time.Now().Add(-2 * time.Hour), Duration: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := s.svc.DeletePool(ctx, s.root, ns, "desk"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := s.back.Pool(ctx, ns, "desk"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("pool after delete: %v; want ENotFound", err)
		}
		pods, _ := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		cms, _ := s.c.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelCTPool})
		leases, _ := s.c.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if len(pods.Items)+len(cms.Items)+len(leases.Items) != 0 {
			t.Errorf("after delete: %d Pods, %d pool ConfigMaps, %d Leases; want none", len(pods.Items), len(cms.Items), len(leases.Items))
		}
	})
}

// execGoroutines counts the goroutines of exec sessions (the terminal's
// and client-go's streams): the whole count also moves with the
// package's other clients (a connection pool's reader, a watch), which
// once left two more after the terminal closed.
func execGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "tools/remotecommand") || strings.Contains(g, "corral-vdi-portal/kube.startExec") || strings.Contains(g, "corral-vdi-portal/kube.(*execConn)") {
			count++
		}
	}
	return count
}
