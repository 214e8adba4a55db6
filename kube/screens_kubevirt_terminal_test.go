package kube_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctDesktop declares CT pool "term" of one member in s's namespace, as an
// admin would with kubectl, claims it for user and waits for its Pod to
// run on one of the node stand-ins' kubelets. Its terminal is reached
// through pods/exec (the pool declares no terminal port).
func ctDesktop(t *testing.T, s *kubeVirtSetup, user string) vdi.Ref {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "pool-term", Labels: map[string]string{kube.LabelCTPool: "term"}},
		Data: map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1", kube.CTKeyShell: `["/bin/sh"]`}}
	if _, err := s.c.Client.CoreV1().ConfigMaps(s.ns).Create(s.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := s.c.PortalServiceAccount(t)
	leases := mustLeases(t, sa)
	back, err := kube.NewCluster(kube.Config{REST: sa, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(back, leases)
	t.Cleanup(svc.StopJobs)
	d, err := svc.Claim(s.ctx, vdi.Identity{Login: user}, s.ns, "term")
	if err != nil {
		t.Fatalf("%s's claim of CT pool term: %v", user, err)
	}
	s.waitFor(t, time.Minute, "the CT desktop's Pod to run", func() (bool, error) {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, d.Name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, err
	})
	return d.Ref()
}

// execUpstreams are a CT desktop's terminals through pods/exec, as the
// kubelet stand-ins count them. A kubelet runs any number of execs side
// by side (each a shell of its own); the portal's shared terminal must
// have one at a time.
type execUpstreams struct {
	ref    vdi.Ref
	nodes  []*testcluster.Node
	before testcluster.ExecCounts
}

func newExecUpstreams(ref vdi.Ref, nodes ...*testcluster.Node) *execUpstreams {
	u := &execUpstreams{ref: ref, nodes: nodes}
	u.before = u.counts()
	return u
}

// counts sums the Pod's exec counts over the nodes (it runs on one).
func (u *execUpstreams) counts() testcluster.ExecCounts {
	var sum testcluster.ExecCounts
	for _, n := range u.nodes {
		c := n.Execs(u.ref.Namespace, u.ref.Name)
		sum.Opened += c.Opened
		sum.Live += c.Live
		sum.MostAtOnce = max(sum.MostAtOnce, c.MostAtOnce)
	}
	return sum
}

func (u *execUpstreams) check(t *testing.T, want int) {
	t.Helper()
	n := u.counts()
	if n.Opened-u.before.Opened != want || n.MostAtOnce > 1 {
		t.Errorf("the kubelet's exec sessions of the CT's Pod: %+v (before: %+v); want %d more opened, never two at once", n, u.before, want)
	}
	t.Logf("the kubelet's exec sessions of the CT's Pod: %+v (before the shared one: %+v)", n, u.before)
}

func (u *execUpstreams) held() bool { return u.counts().Live > 0 }
