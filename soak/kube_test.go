package soak

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// kubeEnv is the kube half of the soak: a real apiserver + etcd, the
// kubelet stand-in (CT Pods run without processes), three portal replicas
// on the kube backend signed in as the portal's ServiceAccount, and a pool.
type kubeEnv struct {
	cluster  *testcluster.Cluster
	ns       string
	pool     string
	replicas []*portal
	watcher  *leaseWatcher
	kubevirt *testcluster.KubeVirtStandIn // nil unless newKubeEnv's vms
}

func (e *kubeEnv) claimPath() string { return "/api/vdi/pools/" + e.ns + "/" + e.pool + "/claim" }
func (e *kubeEnv) releasePath(member string) string {
	return "/api/vdi/desktops/" + e.ns + "/" + member + "/release"
}

// newKubeEnv starts a cluster with the kubelet stand-in and three portal
// replicas on it, for pool; nil (with a failed check) when the cluster
// does not start. The replicas share a peer secret, as the install's
// do: one screen per VM across them (faultKillScreenOwner), and their
// heartbeats split each pool's members for their claims (vdi.Replicas).
// With vms, the KubeVirt stand-in runs too.
func newKubeEnv(t *testing.T, r *report, area, pool string, vms bool) *kubeEnv {
	c, err := testcluster.Start()
	if err != nil {
		r.add(area, "cluster starts", false, "up", "%v", err)
		return nil
	}
	t.Cleanup(func() { c.Stop() })
	c.StartKubelet(t)
	e := &kubeEnv{cluster: c, ns: c.Namespace(t), pool: pool}
	env := []string{"CORRAL_VDI_BACKEND=kube", "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_NAMESPACE=" + e.ns,
		"CORRAL_VDI_PEER_SECRET=" + crand.Text()}
	if vms {
		if e.kubevirt, err = c.StartKubeVirtStandInErr(context.Background()); err != nil {
			r.add(area, "KubeVirt stand-in starts", false, "up", "%v", err)
			return nil
		}
	}
	c.Apply(t, "../deploy/rbac.yaml")
	kubeconfig := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	for range 3 {
		data, _ := os.MkdirTemp("", "cvs")
		t.Cleanup(func() { os.RemoveAll(data) })
		e.replicas = append(e.replicas, startPortal(t, data, "127.0.0.1:0", append(env, "KUBECONFIG="+kubeconfig)...))
	}
	return e
}

func kubePhase(t *testing.T, sc scale, r *report) {
	start := time.Now()
	e := newKubeEnv(t, r, "kube", "storm", true)
	if e == nil {
		return
	}
	c := e.cluster
	ctx := context.Background()
	body := fmt.Sprintf(`{"namespace":%q,"name":%q,"kind":"ct","mode":"ephemeral","source":"corral.test/shell","size":%d}`, e.ns, e.pool, sc.Members)
	if code, buf, err := call(ctx, e.replicas[0].URL, "ops", "POST", "/api/vdi/pools", body); code != 201 {
		r.add("kube", "pool created", false, "201", "%d %s %v", code, buf, err)
		return
	}
	for i, p := range e.replicas {
		took, ok := eventually(60*time.Second, func() bool {
			code, buf, _ := call(ctx, p.URL, "u0", "GET", "/api/vdi/pools", "")
			pools, _ := decode[[]struct {
				Name string `json:"name"`
				Size int    `json:"size"`
			}](buf)
			for _, pl := range pools {
				if code == 200 && pl.Name == e.pool && pl.Size == sc.Members {
					return true
				}
			}
			return false
		})
		if !ok {
			r.add("kube", fmt.Sprintf("replica %d sees the pool", i), false, "within 60 s", "not after %s", took.Round(time.Second))
			return
		}
	}
	r.note("kube: apiserver, kubelet stand-in, 3 replicas and a CT pool of %d up in %s", sc.Members, time.Since(start).Round(time.Second))
	e.watcher = watchLeases(t, c.Client, e.ns, e.pool)
	claimStorm(t, sc, r, e)
	faultKillReplica(t, sc, r, e)
	faultKillScreenOwner(t, r, e)
	faultAPIServerRestart(t, sc, r, e)
	faultEtcdPause(t, sc, r, e)
	faultSQLiteReadOnly(t, sc, r, e)
	faultSQLiteDeleted(t, sc, r, e)
	faultPostgresPaused(t, sc, r, e)
	events, doubles, twice := e.watcher.stop()
	r.add("storm", "double holders (watcher, whole phase)", doubles == 0 && events > 0, "0, with events seen",
		"%d in %d Lease events", doubles, events)
	r.add("storm", "users holding two members (watcher)", twice == 0, "0", "%d", twice)
}

// claimStorm runs sc.Ops claim and release operations from sc.Users users
// on sc.Workers concurrent clients, each request to a random replica.
func claimStorm(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var (
		done      atomic.Int64
		answers   counts
		bad       atomic.Int64
		lat       = make([][]time.Duration, sc.Workers)
		firstBad  atomic.Value
		wg        sync.WaitGroup
		releaseOK atomic.Int64
	)
	start := time.Now()
	for w := range sc.Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 22))
			var mine []string // each user belongs to one worker: a user's operations are sequential
			for u := w; u < sc.Users; u += sc.Workers {
				mine = append(mine, fmt.Sprintf("user%04d", u))
			}
			for i := 0; ctx.Err() == nil && len(mine) > 0; i++ {
				user := mine[i%len(mine)]
				if done.Add(1) > int64(sc.Ops) {
					return
				}
				rep := e.replicas[rng.IntN(len(e.replicas))]
				t0 := time.Now()
				code, buf, err := call(ctx, rep.URL, user, "POST", e.claimPath(), "")
				lat[w] = append(lat[w], time.Since(t0))
				answers.add(fmt.Sprint(code))
				switch code {
				case 200:
				case 409, 429, 403:
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					continue
				default:
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("claim %d %.200s %v", code, buf, err))
					continue
				}
				d, err := decode[desktop](buf)
				if err != nil || d.Name == "" {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("claim 200 without a desktop: %.200s", buf))
					continue
				}
				time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
				done.Add(1)
				rep = e.replicas[rng.IntN(len(e.replicas))]
				code, buf, err = call(ctx, rep.URL, user, "POST", e.releasePath(d.Name), "")
				answers.add(fmt.Sprint(code))
				if code == 200 {
					releaseOK.Add(1)
				} else if code != 429 {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("release %d %.200s %v", code, buf, err))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	n := min(done.Load(), int64(sc.Ops))
	r.add("storm", fmt.Sprintf("%d ops, %d users, 3 replicas, %d members", sc.Ops, sc.Users, sc.Members), n >= int64(sc.Ops) && ctx.Err() == nil,
		"all done within 12 min", "%d in %s (%.0f ops/s)", n, took.Round(time.Second), float64(n)/took.Seconds())
	fb, _ := firstBad.Load().(string)
	r.add("storm", "every operation answered 200/409/limit", bad.Load() == 0, "0 other answers",
		"%d other; %s %s", bad.Load(), answers.String(), fb)
	p50, p99 := percentile(all, 50), percentile(all, 99)
	// A claim waits for its member's Pod to run (the kubelet stand-in polls
	// every 100 ms) and for the user's claim lock; on 2 shared cores the
	// tail is long (docs/reliability.md).
	r.add("storm", "claim latency p50 / p99", p50 < 3*time.Second && p99 < 20*time.Second, "p50 < 3 s, p99 < 20 s", "%s / %s", ms(p50), ms(p99))
	// A release answers while its member is made fresh (#55): the resets
	// end first.
	e.resetsDone(context.Background(), 2*time.Minute)
	var leases coordinationv1.LeaseList
	got, err := e.cluster.Client.CoordinationV1().Leases(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + e.pool})
	if err == nil {
		leases = *got
	}
	r.add("storm", "no Lease left after every release", err == nil && len(leases.Items) == 0, "0 Leases",
		"%d Leases (%v)", len(leases.Items), err)
	// A claim whose client gave up (timeout) still completes: the start
	// outlives the request, and the user who comes back gets the same
	// desktop. The users come back and release theirs, so the faults
	// below start from a free pool.
	if len(leases.Items) > 0 {
		held, _ := e.leasesHeld(context.Background())
		back := map[string]string{}
		for member, user := range held {
			back[user] = member
		}
		e.releaseAll(context.Background(), back)
		left, _ := e.leasesHeld(context.Background())
		r.add("storm", "users coming back release what they hold", len(left) == 0, "0 Leases after", "%d released, %d left", len(held)-len(left), len(left))
	}
}

// hold makes sc.Hold users claim one member each, round robin over the
// replicas, and returns user -> member.
func hold(ctx context.Context, e *kubeEnv, n int, prefix string) (map[string]string, error) {
	held := map[string]string{}
	for i := range n {
		user := fmt.Sprintf("%s%02d", prefix, i)
		code, buf, err := call(ctx, e.replicas[i%len(e.replicas)].URL, user, "POST", e.claimPath(), "")
		if code != 200 {
			return held, fmt.Errorf("claim for %s: %d %.200s %v", user, code, buf, err)
		}
		d, _ := decode[desktop](buf)
		held[user] = d.Name
	}
	return held, nil
}

// leasesHeld reads the pool's Leases as member -> holder.
func (e *kubeEnv) leasesHeld(ctx context.Context) (map[string]string, error) {
	list, err := e.cluster.Client.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + e.pool})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			out[l.Labels[vdi.LabelMember]] = *l.Spec.HolderIdentity
		}
	}
	return out, nil
}

// kept reports whether every claim of held still has its Lease.
func (e *kubeEnv) kept(ctx context.Context, held map[string]string) (lost int, err error) {
	now, err := e.leasesHeld(ctx)
	if err != nil {
		return -1, err
	}
	for user, member := range held {
		if now[member] != user {
			lost++
		}
	}
	return lost, nil
}

// releaseAll releases every claim of held through any replica that
// answers, and waits (up to 2 min) for their members to be made fresh: a
// release answers while that goes on (#55).
func (e *kubeEnv) releaseAll(ctx context.Context, held map[string]string) {
	for user, member := range held {
		for _, p := range e.replicas {
			if code, _, _ := call(ctx, p.URL, user, "POST", e.releasePath(member), ""); code == 200 {
				break
			}
		}
	}
	e.resetsDone(ctx, 2*time.Minute)
}

// resetsDone waits up to d until no claim of the pool is marked for a
// release or reclaim (its member being made fresh), and reports whether
// none was.
func (e *kubeEnv) resetsDone(ctx context.Context, d time.Duration) bool {
	_, ok := eventually(d, func() bool {
		list, err := e.cluster.Client.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + e.pool})
		if err != nil {
			return false
		}
		for _, l := range list.Items {
			if l.Annotations[vdi.AnnotationReclaiming] != "" {
				return false
			}
		}
		return true
	})
	return ok
}

// claimRelease reports whether one claim and its release work on p.
func (e *kubeEnv) claimRelease(ctx context.Context, p *portal, user string) error {
	code, buf, err := call(ctx, p.URL, user, "POST", e.claimPath(), "")
	if code != 200 {
		return fmt.Errorf("claim %d %.120s %v", code, buf, err)
	}
	d, _ := decode[desktop](buf)
	if code, buf, err := call(ctx, p.URL, user, "POST", e.releasePath(d.Name), ""); code != 200 {
		return fmt.Errorf("release %d %.120s %v", code, buf, err)
	}
	return nil
}
