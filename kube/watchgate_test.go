package kube_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// watchGate holds what the watches of one resource deliver while it is
// held, as a replica whose watch is behind would see them.
type watchGate struct {
	suffix string // of the watched URL path, e.g. "/pods"

	mu   sync.Mutex
	open chan struct{}
}

// newWatchGate returns an open gate for the watches whose path ends in
// suffix.
func newWatchGate(suffix string) *watchGate {
	g := &watchGate{suffix: suffix, open: make(chan struct{})}
	close(g.open)
	return g
}

// hold stops what the watches read from reaching their clients.
func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

// release lets it through again.
func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *watchGate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// wrap is a rest.Config WrapTransport whose watches of g's resource pass
// through g; prev (may be nil) is the config's earlier one.
func (g *watchGate) wrap(prev func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && strings.HasSuffix(req.URL.Path, g.suffix) && req.URL.Query().Get("watch") == "true" {
				resp.Body = &gatedBody{ReadCloser: resp.Body, g: g}
			}
			return resp, err
		})
	}
}

// gatedBody hands on what it read only while its gate is open.
type gatedBody struct {
	io.ReadCloser
	g *watchGate
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.g.wait()
	return n, err
}
