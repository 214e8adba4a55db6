package handlers

import (
	"crypto/subtle"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
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

// handler serves GET /metrics in the Prometheus text format; with a
// token, only to requests bearing it, refusing others through refuse.
func (m *metrics) handler(token string, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	h := promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	if token == "" {
		return h
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
