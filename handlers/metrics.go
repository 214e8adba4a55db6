package handlers

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the portal's Prometheus metrics, on a registry of its own so
// that two handlers in one process (tests) do not collide.
type metrics struct {
	registry *prometheus.Registry
	consoles *prometheus.GaugeVec   // open consoles by protocol and path
	sessions *prometheus.CounterVec // consoles opened by protocol and path
	bytes    *prometheus.CounterVec // bytes relayed by direction
}

func newMetrics() *metrics {
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
	}
	m.registry.MustRegister(m.consoles, m.sessions, m.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves GET /metrics in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
