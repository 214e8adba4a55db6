package relay_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// TestPeerPost_KeepsConnections: bursts of peer requests to one replica
// (a claim storm's forwards) reuse the connections the first burst
// opened, rather than each later burst opening most of its own again
// (http.DefaultClient keeps two idle connections to a host). The peer
// answers a burst only once all of it has arrived, so that every burst
// needs as many connections at once.
func TestPeerPost_KeepsConnections(t *testing.T) {
	const burst, bursts = 8, 5
	var opened atomic.Int64
	var mu sync.Mutex
	arrived, release := 0, make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		if arrived++; arrived == burst {
			close(release)
		}
		wait := release
		mu.Unlock()
		select {
		case <-wait:
		case <-time.After(time.Minute):
			mu.Lock()
			t.Errorf("a burst of %d peer requests: %d arrived within a minute; want all at once", burst, arrived)
			mu.Unlock()
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	var first int64
	for b := range bursts {
		mu.Lock()
		arrived, release = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				res, err := relay.PeerPost(context.Background(), srv.URL, []byte("secret"), "take", []byte(`{"login":"alice"}`))
				if err != nil {
					t.Errorf("peer post: %v", err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			})
		}
		wg.Wait()
		if b == 0 {
			first = opened.Load()
		}
	}
	// Without idle connections kept, each later burst opens at least
	// burst-2 new ones (24 here); a connection handed back a moment after
	// the next burst began may still be dialled anew now and then.
	if later := opened.Load() - first; later >= burst {
		t.Errorf("%d later bursts of %d peer requests opened %d new connections (the first opened %d); want them to reuse the first burst's", bursts-1, burst, later, first)
	}
}
