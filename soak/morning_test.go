package soak

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The morning storm: sc.StormUsers users arrive over sc.StormOver, each
// claiming once from a pool of as many members across three replicas, the
// pool's standby sized to the arrival rate (arrivals per second at each
// replica's share of the members × a cold start measured first, for every
// share, as a working-hours floor). It measures, in the
// same run, the serial limit (one claim at a time, of a warm member and of
// a cold one), the storm's time to a won Lease (the Lease's acquireTime
// minus when the request left) and to a running desktop (the answer), the
// double holders the Lease watcher saw, and the dashboard of the pool
// served from the replicas' caches.
func stormPhase(t *testing.T, sc scale, r *report) {
	e := newKubeEnv(t, r, "morning", "morning", false)
	if e == nil {
		return
	}
	ctx := context.Background()
	// The pool is declared as an admin would with kubectl: a pool above
	// the API's size limit (vdi.MaxPoolSize) is one ConfigMap still.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: kube.CTConfigMapName(e.pool), Labels: map[string]string{kube.LabelCTPool: e.pool}},
		Data: map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeyMode: string(vdi.ModeEphemeral), kube.CTKeySize: fmt.Sprint(sc.StormUsers)}}
	if _, err := e.cluster.Client.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		r.add("morning", "pool declared", false, "created", "%v", err)
		return
	}
	for i, p := range e.replicas {
		if _, ok := eventually(60*time.Second, func() bool {
			code, buf, _ := call(ctx, p.URL, "ops", "GET", "/api/vdi/pools", "")
			pools, _ := decode[[]struct {
				Name string `json:"name"`
				Size int    `json:"size"`
			}](buf)
			for _, pl := range pools {
				if code == 200 && pl.Name == e.pool && pl.Size == sc.StormUsers {
					return true
				}
			}
			return false
		}); !ok {
			r.add("morning", fmt.Sprintf("replica %d sees the pool", i), false, "within 60 s", "not")
			return
		}
	}
	watcher := watchLeases(t, e.cluster.Client, e.ns, e.pool)
	cgroup := quietControlPlane(t, r, e, "morning")

	// The serial limit, cold: one claim at a time of a stopped member. The
	// serial claimants release theirs before the storm (an ephemeral
	// member comes back fresh), so the storm has the whole pool.
	serialHeld := map[string]string{} // user -> member
	defer func() { e.releaseAll(ctx, serialHeld) }()
	var warmClaims []sentClaim
	// serial makes n claims one at a time, through the replicas in turn;
	// with warmTo > 0 each waits first for warmTo warm members, so that
	// it is a warm claim alone.
	serial := func(prefix string, n, warmTo int) (won, running []time.Duration, ok bool) {
		for i := range n {
			if warmTo > 0 && !e.awaitWarm(ctx, warmTo) {
				r.note("morning: %s%d claims with fewer than %d warm members (%d after 2 min)", prefix, i, warmTo, e.warm(ctx))
			}
			user, rep := fmt.Sprintf("%s%d", prefix, i), e.replicas[i%3].URL
			t0 := time.Now()
			code, buf, err := call(ctx, rep, user, "POST", e.claimPath(), "")
			if code != 200 {
				r.add("morning", "serial claim "+user, false, "200", "%d %.200s %v", code, buf, err)
				return nil, nil, false
			}
			running = append(running, time.Since(t0))
			d, _ := decode[desktop](buf)
			serialHeld[user] = d.Name
			c := sentClaim{user: user, replica: rep}
			if at, err := e.acquired(ctx, d.Name); err == nil {
				c.won = at.Sub(t0)
				won = append(won, c.won)
			}
			if warmTo > 0 {
				warmClaims = append(warmClaims, c)
			}
		}
		return won, running, true
	}
	serialLoad := watchLoad(e, cgroup)
	coldWon, coldRun, ok := serial("cold", 5, 0)
	if !ok {
		return
	}
	cold := percentile(coldRun, 50)
	rate := float64(sc.StormUsers) / sc.StormOver.Seconds()
	// Each replica's claims try its own share of the members first
	// (vdi/claim_share.go), so each share wants its part of the arrivals
	// × a start: the portal places the warm members across the shares.
	shares := len(e.replicas)
	standby := min(sc.StormUsers, shares*int(math.Ceil(rate*cold.Seconds()/float64(shares))))
	patch := fmt.Sprintf(`{"standby": {"min": 1, "max": %d}, "standbySchedule": {"days": "sun-sat", "from": "00:00", "to": "23:59", "standby": %d}}`, sc.StormUsers, standby)
	if code, buf, err := call(ctx, e.replicas[0].URL, "ops", "PATCH", "/api/vdi/pools/"+e.ns+"/"+e.pool, patch); code != 200 {
		r.add("morning", "standby set", false, "200", "%d %.200s %v", code, buf, err)
		return
	}
	warmUp := time.Now()
	if _, ok := eventually(5*time.Minute, func() bool { return e.warm(ctx) >= standby }); !ok {
		r.add("morning", fmt.Sprintf("standby of %d warm", standby), false, "within 5 min", "%d warm", e.warm(ctx))
		return
	}
	r.note("morning: %d users over %s is %.1f/s; a cold claim takes %s, so the standby is %d (%d replicas' shares × ⌈rate ÷ replicas × cold start⌉), warm %s after it was set",
		sc.StormUsers, sc.StormOver, rate, ms(cold), standby, shares, time.Since(warmUp).Round(time.Second))
	// The serial limit, warm: one claim at a time of a warm member, each
	// once the standby is whole again, through the three replicas as the
	// storm's claims are (so about two in three forwarded). Thirty, so
	// that their p99 is not just their second slowest.
	warmWon, warmRun, ok := serial("warm", sc.SerialWarm, standby)
	if !ok {
		return
	}
	holders, err := e.shardHolders(ctx)
	if err != nil {
		r.note("morning: the claim shards' holders not read: %v", err)
	}
	serialLocal, serialForwarded := byPath(warmClaims, holders)
	r.note("morning: while the serial claims ran: %s", serialLoad.stop())
	e.releaseAll(ctx, serialHeld)
	clear(serialHeld)
	if _, ok := eventually(2*time.Minute, func() bool { return e.warm(ctx) >= standby }); !ok {
		r.note("morning: the standby had not refilled to %d before the storm (%d warm)", standby, e.warm(ctx))
	}

	// The storm: every user once, at a random moment of sc.StormOver.
	type result struct {
		user    string
		replica string
		t0      time.Time
		running time.Duration
		member  string
		code    int
	}
	results := make([]result, sc.StormUsers)
	rng := rand.New(rand.NewPCG(35, 1000))
	lostBefore, lostRead := e.racesLost(ctx)
	warmBefore, coldBefore, wonRead := e.claimsWon(ctx)
	stormLoad := watchLoad(e, cgroup)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		at := time.Duration(rng.Int64N(int64(sc.StormOver)))
		rep := e.replicas[rng.IntN(len(e.replicas))]
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(at)))
			res := result{user: fmt.Sprintf("morning%04d", i), replica: rep.URL, t0: time.Now()}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			for {
				code, buf, _ := call(cctx, rep.URL, res.user, "POST", e.claimPath(), "")
				res.code = code
				if code == 200 {
					d, _ := decode[desktop](buf)
					res.member = d.Name
				}
				if code != 429 || cctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			res.running = time.Since(res.t0)
			results[i] = res
		})
	}
	wg.Wait()
	took := time.Since(start)
	r.note("morning: while the storm ran: %s", stormLoad.stop())
	r.note("morning: the portals' CPU, %.2f ms a claim (%s in all: the claims, and the standby refills and caches they wake on every replica)",
		float64(stormLoad.portalCPU)/float64(time.Millisecond)/float64(sc.StormUsers), stormLoad.portalCPU)
	if lostAfter, ok := e.racesLost(ctx); ok && lostRead {
		r.note("morning: lost Lease races per claim %.3f (%.0f in %d claims, the replicas' corral_vdi_claim_races_lost_total; goal ≤ 0.2)",
			(lostAfter-lostBefore)/float64(sc.StormUsers), lostAfter-lostBefore, sc.StormUsers)
	} else {
		r.note("morning: lost Lease races not read: a replica's /metrics did not give corral_vdi_claim_races_lost_total")
	}
	if warmAfter, coldAfter, ok := e.claimsWon(ctx); ok && wonRead {
		r.note("morning: storm claims given a warm member %.0f, a cold one %.0f (the standby's hits; the replicas' corral_vdi_claims_won_total)",
			warmAfter-warmBefore, coldAfter-coldBefore)
	}
	leases, err := e.cluster.Client.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + e.pool})
	acquired := map[string]time.Time{} // holder -> acquireTime
	if err == nil {
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && l.Spec.AcquireTime != nil {
				acquired[*l.Spec.HolderIdentity] = l.Spec.AcquireTime.Time
			}
		}
	}
	var won, running []time.Duration
	var stormClaims []sentClaim
	got := 0
	for _, res := range results {
		if res.code != 200 {
			continue
		}
		got++
		running = append(running, res.running)
		c := sentClaim{user: res.user, replica: res.replica}
		if at, ok := acquired[res.user]; ok {
			c.won = at.Sub(res.t0)
			won = append(won, c.won)
		}
		stormClaims = append(stormClaims, c)
	}
	r.add("morning", fmt.Sprintf("%d users over %s, 3 replicas, %d members", sc.StormUsers, sc.StormOver, sc.StormUsers), got == sc.StormUsers,
		"every user gets a desktop", "%d of %d in %s", got, sc.StormUsers, took.Round(time.Second))
	events, doubles, twice := watcher.stop()
	r.add("morning", "double holders (watcher)", doubles == 0 && twice == 0 && events > 0, "0, with events seen",
		"%d double, %d users with two, in %d Lease events", doubles, twice, events)

	serialWon := percentile(warmWon, 50)
	p50, p99 := percentile(won, 50), percentile(won, 99)
	r.note("morning: Lease won p50 %s, p99 %s; serial limit (one warm claim alone, p50 of %d) %s: p99 is %.1f× it (goal ≤ 3×)",
		ms(p50), ms(p99), len(warmWon), ms(serialWon), ratio(p99, serialWon))
	if holders != nil {
		local, forwarded := byPath(stormClaims, holders)
		r.note("morning: Lease won by path: the storm's claims %s; the warm claims alone %s; the storm's p99 is %.1f× the lone claims' p50 run by the replica asked",
			pathFigures(local, forwarded), pathFigures(serialLocal, serialForwarded), ratio(p99, percentile(serialLocal, 50)))
	}
	r.note("morning: until a running desktop p50 %s, p99 %s; a warm claim alone p99 %s of %d (%.1f×, goal ≤ 2×), a cold one alone p50 %s (Lease won %s)",
		ms(percentile(running, 50)), ms(percentile(running, 99)), ms(percentile(warmRun, 99)), len(warmRun), ratio(percentile(running, 99), percentile(warmRun, 99)),
		ms(cold), ms(percentile(coldWon, 50)))

	// The dashboard of the pool, from the replicas' caches.
	var dash []time.Duration
	for i := range 10 {
		t0 := time.Now()
		if code, _, _ := call(ctx, e.replicas[i%3].URL, "ops", "GET", "/admin", ""); code == 200 {
			dash = append(dash, time.Since(t0))
		}
	}
	r.note("morning: GET /admin with the %d-member pool, from the caches: median %s of %d (end to end over loopback; BenchmarkKubeDashboard measures the server side)",
		sc.StormUsers, ms(percentile(dash, 50)), len(dash))
	usageSawStorm(ctx, r, e, got)
}

// usageSamples is GET /api/vdi/usage's answer, as far as the soak reads it.
type usageSamples struct {
	Pools []struct {
		Namespace, Pool string
		Samples         []struct{ Size, Claimed int }
	}
}

// usageSawStorm checks the admins' usage charts (GET /api/vdi/usage, what
// /admin/usage draws) after the storm: the pool's last day peaks at held
// desktops, every user who got one holding it, from the samples the three
// replicas wrote and merged.
func usageSawStorm(ctx context.Context, r *report, e *kubeEnv, held int) {
	peak := 0
	_, ok := eventually(2*time.Minute, func() bool {
		code, buf, _ := call(ctx, e.replicas[0].URL, "ops", "GET", "/api/vdi/usage?range=day", "")
		if code != 200 {
			return false
		}
		u, _ := decode[usageSamples](buf)
		for _, p := range u.Pools {
			if p.Namespace != e.ns || p.Pool != e.pool {
				continue
			}
			for _, s := range p.Samples {
				peak = max(peak, s.Claimed)
			}
		}
		return peak >= held
	})
	r.add("morning", "the usage chart's peak after the storm", ok, fmt.Sprintf("%d in use (within 2 min)", held), "%d", peak)
}

// acquired returns when the Lease of member was acquired.
func (e *kubeEnv) acquired(ctx context.Context, member string) (time.Time, error) {
	l, err := e.cluster.Client.CoordinationV1().Leases(e.ns).Get(ctx, vdi.LeasePrefix+member, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.AcquireTime == nil {
		return time.Time{}, fmt.Errorf("lease %s has no acquireTime", l.Name)
	}
	return l.Spec.AcquireTime.Time, nil
}

// warm counts the pool's running Pods no Lease holds.
func (e *kubeEnv) warm(ctx context.Context) int {
	pods, err := e.cluster.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + e.pool})
	if err != nil {
		return 0
	}
	held, _ := e.leasesHeld(ctx)
	n := 0
	for _, p := range pods.Items {
		if _, ok := held[p.Name]; !ok && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// awaitWarm waits (2 min at most) until the pool has n warm members, and
// reports whether it did. It looks every 100 ms: each look lists the
// pool's Pods, which for 1,000 members is work for the API server that a
// claim alone should not run beside.
func (e *kubeEnv) awaitWarm(ctx context.Context, n int) bool {
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if e.warm(ctx) >= n {
			return true
		}
	}
	return false
}

// racesLost sums the replicas' corral_vdi_claim_races_lost_total; false
// when a replica's /metrics does not give it.
func (e *kubeEnv) racesLost(ctx context.Context) (float64, bool) {
	sum := 0.0
	for _, p := range e.replicas {
		code, buf, _ := call(ctx, p.URL, "", "GET", "/metrics", "")
		n, ok := metricValue(buf, "corral_vdi_claim_races_lost_total")
		if code != 200 || !ok {
			return 0, false
		}
		sum += n
	}
	return sum, true
}

// metricValue reads the value of a series without labels from /metrics'
// text.
func metricValue(text []byte, name string) (float64, bool) {
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// ratio is a / b, 0 when b is.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
