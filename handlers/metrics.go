package handlers

import (
	"context"
	"crypto/subtle"
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// metrics are the portal's Prometheus metrics, on a registry of its own so
// that two handlers in one process (tests) do not collide.
type metrics struct {
	registry *prometheus.Registry
	consoles *prometheus.GaugeVec   // open consoles by protocol and path
	sessions *prometheus.CounterVec // consoles opened by protocol and path
	bytes    *prometheus.CounterVec // bytes relayed by direction

	claims       *prometheus.CounterVec   // claims by result
	claimSeconds *prometheus.HistogramVec // how long claims took, by result
}

// consoleOpened counts a console of p by path open (and opened) until
// the returned func, which counts the bytes it relayed
// (console.SessionsConfig.Count).
func (m *metrics) consoleOpened(p vdi.Protocol, path string) (closed func(relay.Stats)) {
	open := m.consoles.WithLabelValues(string(p), path)
	open.Inc()
	m.sessions.WithLabelValues(string(p), path).Inc()
	return func(st relay.Stats) {
		m.bytes.WithLabelValues("in").Add(float64(st.BytesIn))
		m.bytes.WithLabelValues("out").Add(float64(st.BytesOut))
		open.Dec()
	}
}

// metricsConfig is what the metrics read at scrape time.
type metricsConfig struct {
	desktops   Desktops                        // the pools' members
	admin      Admin                           // the claims' and reclaims' counts; nil: none
	recordings Recordings                      // the recordings' disk use; nil: none
	ready      func(ctx context.Context) error // /readyz's answer
	outage     func() string                   // the API server's outage, if any
}

func newMetrics(cfg metricsConfig) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		consoles: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corral_vdi_consoles_open", Help: "Console connections open now.",
		}, []string{"protocol", "path"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_vdi_consoles_total", Help: "Console connections opened.",
		}, []string{"protocol", "path"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_vdi_relay_bytes_total", Help: "Bytes relayed, by direction (in: client to desktop).",
		}, []string{"direction"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_vdi_claims_total", Help: "Claims, by result: ok or the refusal's code (conflict: no free member; full: a limit).",
		}, []string{"result"}),
		claimSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_vdi_claim_duration_seconds", Help: "How long a claim took until its desktop was asked to start, by result.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"result"}),
	}
	// Every series there will be, at 0 from the start: rates and alerts
	// then see a beginning, not a series that appears with its first event.
	for _, p := range []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolRDP, vdi.ProtocolSerial, vdi.ProtocolTerminal} {
		for _, path := range []string{console.PathDirect, console.PathPeer, console.PathAPIServer} {
			m.consoles.WithLabelValues(string(p), path)
			m.sessions.WithLabelValues(string(p), path)
		}
	}
	m.bytes.WithLabelValues("in")
	m.bytes.WithLabelValues("out")
	m.claims.WithLabelValues("ok")
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_vdi_ready", Help: "1 while this replica is ready (its /readyz answers 200), else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return boolGauge(cfg.ready(ctx) == nil)
	})
	apiserver := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_vdi_apiserver_up", Help: "1 while the Kubernetes API server answers this replica (always 1 on the local backend), else 0.",
	}, func() float64 { return boolGauge(cfg.outage == nil || cfg.outage() == "") })
	m.registry.MustRegister(m.consoles, m.sessions, m.bytes, m.claims, m.claimSeconds, ready, apiserver,
		newPoolCollector(cfg.desktops), recordingsCollector(cfg.recordings), countersCollector(cfg.admin),
		goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// goCollector is the Go runtime's usual series plus go_gc_heap_live_bytes,
// the heap its last collection found live: what the portal's memory needs,
// where the heap in use and the RSS also hold garbage not yet collected
// (the heap grows to twice what is live before a collection).
func goCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}))
}

// recordingsCollector reports the bytes recordings take on this replica's
// disk and their cap (-1: none).
func recordingsCollector(r Recordings) prometheus.Collector {
	used := func(max bool) float64 {
		u, m := int64(0), int64(-1)
		if r != nil {
			u, m = r.Used()
		}
		if max {
			return float64(m)
		}
		return float64(u)
	}
	return collectorList{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "corral_vdi_recordings_bytes", Help: "Bytes all recordings take on this replica's disk."},
			func() float64 { return used(false) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "corral_vdi_recordings_max_bytes", Help: "The cap on recordings' bytes (CORRAL_VDI_RECORDING_MAX_BYTES; -1: none)."},
			func() float64 { return used(true) }),
	}
}

// collectorList is several collectors as one.
type collectorList []prometheus.Collector

// Describe describes each collector.
func (l collectorList) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l {
		c.Describe(ch)
	}
}

// Collect collects each collector.
func (l collectorList) Collect(ch chan<- prometheus.Metric) {
	for _, c := range l {
		c.Collect(ch)
	}
}

// boolGauge is a gauge's value for b: 1 or 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// handler serves GET /metrics in the Prometheus text format (it names
// pools and their namespaces): with a token, only to requests bearing it;
// without one and with closed set (a deployed portal whose Secret lacks
// the token), to nobody, closed being the hint of how to open it; else
// only to requests straight from this machine (a Prometheus beside the
// embedded default), never through a proxy. It refuses others through
// refuse.
func (m *metrics) handler(token, closed string, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	h := promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	if token == "" && closed != "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			refuse(w, r, vdi.Errorf(vdi.EUnavailable, closed, "Metrics are closed: this portal has no metrics token."))
		})
	}
	if token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := auth.DirectLoopback(r, "Reading /metrics without a token",
				"Scrape it on the portal's own machine at http://127.0.0.1, or set CORRAL_VDI_METRICS_TOKEN (or _FILE) and send Authorization: Bearer <token>."); err != nil {
				refuse(w, r, err)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			refuse(w, r, vdi.Errorf(vdi.EUnauthorized,
				"Send Authorization: Bearer <token>, the token in CORRAL_VDI_METRICS_TOKEN (or _FILE); in Prometheus set authorization.credentials_file.",
				"Metrics need a bearer token."))
			return
		}
		h.ServeHTTP(w, r)
	})
}
