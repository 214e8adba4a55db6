package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestMetrics_WhoMayRead: without a token, /metrics answers a request
// straight from this machine (a Prometheus beside the embedded default)
// and refuses one from another host or through a proxy on this machine
// (tailscale serve, nginx), which would hand it to anyone; with a token,
// only its bearer, from anywhere. Closed (a deployed portal without its
// token), nobody, with the hint that opens it.
func TestMetrics_WhoMayRead(t *testing.T) {
	const closeHint = "Add metrics-token to the Secret."
	m := &metrics{registry: prometheus.NewRegistry()}
	refuse := func(w http.ResponseWriter, _ *http.Request, err error) {
		switch vdi.ErrorCode(err) {
		case vdi.EUnauthorized:
			w.WriteHeader(http.StatusUnauthorized)
		case vdi.EForbidden:
			w.WriteHeader(http.StatusForbidden)
		case vdi.EUnavailable:
			if e := (*vdi.Error)(nil); !errors.As(err, &e) || e.Hint != closeHint {
				t.Errorf("closed with %v; want the hint %q", err, closeHint)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			t.Errorf("refused with %v; want EUnauthorized, EForbidden or EUnavailable", err)
		}
	}
	for _, tc := range []struct {
		name, token, closed, remote, host string
		header                            []string
		want                              int
	}{
		{"this machine", "", "", "127.0.0.1:4000", "127.0.0.1:8080", nil, 200},
		{"another host", "", "", "192.0.2.9:4000", "portal.example:8080", nil, 403},
		{"through tailscale serve", "", "", "127.0.0.1:4000", "portal.tailnet.ts.net", []string{"Tailscale-User-Login", "mallory"}, 403},
		{"through nginx", "", "", "127.0.0.1:4000", "127.0.0.1:8080", []string{"X-Forwarded-For", "192.0.2.9"}, 403},
		{"no token sent", "tok", "", "127.0.0.1:4000", "127.0.0.1:8080", nil, 401},
		{"another token", "tok", "", "192.0.2.9:4000", "portal.example", []string{"Authorization", "Bearer other"}, 401},
		{"the token", "tok", "", "192.0.2.9:4000", "portal.example", []string{"Authorization", "Bearer tok"}, 200},
		// A deployed portal whose Secret lacks the token: closed to all,
		// this machine too (a sidecar in the pod is on loopback).
		{"closed, this machine", "", closeHint, "127.0.0.1:4000", "127.0.0.1:8080", nil, 503},
		{"closed, another host", "", closeHint, "192.0.2.9:4000", "portal.example", []string{"Authorization", "Bearer "}, 503},
		{"closed but a token set", "tok", closeHint, "192.0.2.9:4000", "portal.example", []string{"Authorization", "Bearer tok"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/metrics", nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			for i := 0; i+1 < len(tc.header); i += 2 {
				r.Header.Set(tc.header[i], tc.header[i+1])
			}
			w := httptest.NewRecorder()
			m.handler(tc.token, tc.closed, refuse).ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("GET /metrics %s: %d; want %d", tc.name, w.Code, tc.want)
			}
		})
	}
}
