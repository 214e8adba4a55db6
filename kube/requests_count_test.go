package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestCounter counts the API-server requests a rest.Config's clients
// send, by method, so benchmarks and tests can say what a claim or a page
// view costs (issue #35).
type requestCounter struct {
	mu       sync.Mutex
	byMethod map[string]int
}

// countRequests makes every client built from cfg count its requests in
// the returned counter.
func countRequests(cfg *rest.Config) *requestCounter {
	c := &requestCounter{byMethod: map[string]int{}}
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.byMethod[r.Method]++
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	return c
}

// total reports how many requests were sent so far.
func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byMethod {
		n += v
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCountRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	counter := countRequests(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = cs.CoordinationV1().Leases("pool").Get(context.Background(), "corral-vdi-m1", metav1.GetOptions{})
	}
	if got, want := counter.total(), 3; got != want {
		t.Errorf("total() = %d; want %d", got, want)
	}
}
