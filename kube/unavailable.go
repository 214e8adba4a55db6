package kube

import (
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ReportUnreachable makes every request through cfg that gets no answer
// from the API server (refused, reset, timed out, TLS broken) fail with a
// vdi.Error EUnavailable that says so and what to do, instead of a bare
// transport error. A Lease is written by the API server or not at all, so
// claims made before stay as they were.
func ReportUnreachable(cfg *rest.Config) {
	host := cfg.Host
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return unreachable{rt: rt, host: host}
	})
}

// unreachable is a RoundTripper that turns transport errors into EUnavailable.
type unreachable struct {
	rt   http.RoundTripper
	host string
}

func (u unreachable) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := u.rt.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		err = &vdi.Error{Code: vdi.EUnavailable, Err: err,
			Msg:  "The Kubernetes API server (" + u.host + ") does not answer.",
			Hint: "Try again in a minute: claims already made are kept. If it persists, an admin should check the cluster's control plane and the portal's network to it."}
	}
	return res, err
}

// CloseIdleConnections passes on to the wrapped transport, so that
// client-go can drop its pooled connections.
func (u unreachable) CloseIdleConnections() {
	if c, ok := u.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// WrappedRoundTripper returns the wrapped transport (for client-go's
// transport inspection).
func (u unreachable) WrappedRoundTripper() http.RoundTripper { return u.rt }
