package handlers

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// countedDesktops is Desktops that counts every claim, wherever it comes
// from (home page, kiosk, API, agent seat), by result, and times it.
type countedDesktops struct {
	inner
	m *metrics
}

// inner names Desktops for embedding (it has a method of that name).
type inner = Desktops

// Claim claims as Desktops does and counts the claim.
func (d countedDesktops) Claim(ctx context.Context, id vdi.Identity, namespace, pool string) (vdi.Desktop, error) {
	start := time.Now()
	got, err := d.inner.Claim(ctx, id, namespace, pool)
	d.m.claimed(start, err)
	return got, err
}

// ClaimStarting claims as Desktops does and counts the claim.
func (d countedDesktops) ClaimStarting(ctx context.Context, id vdi.Identity, namespace, pool string) (vdi.Desktop, error) {
	start := time.Now()
	got, err := d.inner.ClaimStarting(ctx, id, namespace, pool)
	d.m.claimed(start, err)
	return got, err
}

// claimed counts a claim that began at start and ended with err: result
// "ok" or the error's code (conflict: no free member).
func (m *metrics) claimed(start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = string(vdi.ErrorCode(err))
	}
	m.claims.WithLabelValues(result).Inc()
	m.claimSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// poolCollector reports each pool's members at scrape time, as the
// backend's caches see them.
type poolCollector struct {
	desktops Desktops
	size     *prometheus.Desc
	members  *prometheus.Desc
	standby  *prometheus.Desc
	power    *prometheus.Desc
	failed   prometheus.Counter
}

// powers are the power states desktops are counted by, each reported
// (0 too) for every pool.
var powers = []vdi.Power{vdi.PowerStopped, vdi.PowerStarting, vdi.PowerRunning, vdi.PowerStopping, vdi.PowerFailed}

func newPoolCollector(d Desktops) *poolCollector {
	// Not "namespace": Prometheus sets that target label to the portal
	// pod's own namespace (and renames the scraped one).
	pool := []string{"pool_namespace", "pool"}
	return &poolCollector{
		desktops: d,
		size:     prometheus.NewDesc("corral_vdi_pool_size", "Members a pool is declared with.", pool, nil),
		members:  prometheus.NewDesc("corral_vdi_pool_members", "A pool's members by state: free, claimed, or resetting (made fresh or stopped after a claim ended).", append(pool, "state"), nil),
		standby:  prometheus.NewDesc("corral_vdi_pool_standby_min", "Free members a pool keeps powered on at least.", pool, nil),
		power:    prometheus.NewDesc("corral_vdi_desktops", "A pool's members by power state (failed: it did not start, or ended on its own).", append(pool, "power"), nil),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_vdi_pool_scrape_errors_total",
			Help: "Scrapes whose pool list the backend did not give (the pool series are then missing)."}),
	}
}

// Describe sends the collector's descriptions.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.members
	ch <- c.standby
	ch <- c.power
	c.failed.Describe(ch)
}

// Collect lists the pools as an admin sees them (every pool).
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.failed.Collect(ch)
	if c.desktops == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin := vdi.Identity{Login: "metrics", Admin: true}
	pools, err := c.desktops.Pools(ctx, admin)
	if err != nil {
		c.failed.Inc()
		return
	}
	members, err := c.desktops.Desktops(ctx, admin, true)
	if err != nil {
		c.failed.Inc()
		return
	}
	counts := map[[3]string]int{}
	for _, d := range members {
		counts[[3]string{d.Namespace, d.Pool, string(d.Power)}]++
	}
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Size), p.Namespace, p.Name)
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(p.Free), p.Namespace, p.Name, "free")
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(p.Claimed), p.Namespace, p.Name, "claimed")
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(p.Resetting), p.Namespace, p.Name, "resetting")
		ch <- prometheus.MustNewConstMetric(c.standby, prometheus.GaugeValue, float64(p.Standby.Min), p.Namespace, p.Name)
		for _, pw := range powers {
			n := counts[[3]string{p.Namespace, p.Name, string(pw)}]
			ch <- prometheus.MustNewConstMetric(c.power, prometheus.GaugeValue, float64(n), p.Namespace, p.Name, string(pw))
		}
	}
}

// countersCollector reports what the claim service counted: claims won by
// whether their member was warm (the standby's hits), the races claims
// lost, and reclaims (and refused ones) by rule. Every series is there from the start, at 0 too.
func countersCollector(a Admin) prometheus.Collector {
	won := prometheus.NewDesc("corral_vdi_claims_won_total",
		"Claims won, by whether their member was warm (running or starting: a warm standby's hit) or cold (it had to be started).", []string{"member"}, nil)
	lost := prometheus.NewDesc("corral_vdi_claim_races_lost_total",
		"Claims' writes that found their desktop taken by another claim meanwhile (on any replica); each claim then tries another desktop. A storm's races lost per claim is this over corral_vdi_claims_total.", nil, nil)
	reclaims := prometheus.NewDesc("corral_vdi_reclaims_total",
		"Desktops the reclaim loop took back, by rule (disconnect-grace, max-session, idle, lease-expired).", []string{"rule"}, nil)
	refused := prometheus.NewDesc("corral_vdi_reclaims_refused_total",
		"Reclaims whose reset the backend refused (a member of a closed pool with no access of its own: it stays claimed until an admin sets the pool's access again), by rule (release and force-release: a release whose portal died mid-reset, taken over by the reclaim loop); one each reclaim round while it stays so.", []string{"rule"}, nil)
	return collectorFunc{descs: []*prometheus.Desc{won, lost, reclaims, refused}, collect: func(ch chan<- prometheus.Metric) {
		var c vdi.Counters
		if a != nil {
			c = a.Counters()
		}
		ch <- prometheus.MustNewConstMetric(won, prometheus.CounterValue, float64(c.ClaimsWarm), "warm")
		ch <- prometheus.MustNewConstMetric(won, prometheus.CounterValue, float64(c.ClaimsCold), "cold")
		ch <- prometheus.MustNewConstMetric(lost, prometheus.CounterValue, float64(c.RacesLost))
		for _, r := range vdi.ReclaimRules {
			ch <- prometheus.MustNewConstMetric(reclaims, prometheus.CounterValue, float64(c.Reclaims[r]), r)
		}
		for _, r := range vdi.RefusedRules {
			ch <- prometheus.MustNewConstMetric(refused, prometheus.CounterValue, float64(c.ReclaimsRefused[r]), r)
		}
	}}
}

// collectorFunc is a collector of fixed descriptions whose metrics collect
// makes at scrape time.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

// Describe sends the descriptions.
func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect makes the metrics.
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// DialHead dials a VM display's head n where Desktops has heads
// (vdi.Service.DialHead).
func (d countedDesktops) DialHead(ctx context.Context, ref vdi.Ref, n int) (net.Conn, error) {
	if hd, ok := d.inner.(headDialer); ok {
		return hd.DialHead(ctx, ref, n)
	}
	return nil, oneHead(ref)
}
