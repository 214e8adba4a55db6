package kube

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

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
	if err == nil && res.StatusCode == http.StatusTooManyRequests && !waitable(req, res) {
		res.Body.Close()
		return nil, &vdi.Error{Code: vdi.EUnavailable, Err: fmt.Errorf("%s %s: 429 Too Many Requests, retry after %ss", req.Method, req.URL.Path, res.Header.Get("Retry-After")),
			Msg:  "The Kubernetes API server (" + u.host + ") refuses the portal's requests for now: too many at once (429, its priority level for the portal is full).",
			Hint: "Try again in a minute: claims already made are kept. If it persists, an admin should check the API server's load and the portal's FlowSchema and priority level (deploy/base/flowcontrol.yaml)."}
	}
	return res, err
}

// waitable reports whether client-go can wait as the API server's
// refusal res asks (Retry-After) and try req again before req's deadline;
// when it cannot, the wait would only end in "context deadline exceeded"
// with the refusal forgotten, so it is answered at once instead. (A
// request the API server refused was not carried out: nothing to undo.)
func waitable(req *http.Request, res *http.Response) bool {
	deadline, ok := req.Context().Deadline()
	if !ok {
		return true
	}
	secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil {
		return true // client-go does not wait either: it returns the refusal
	}
	return time.Until(deadline) > time.Duration(secs)*time.Second
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
