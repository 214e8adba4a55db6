package relay_test

// The comparison's latency, memory and idle runs: many sessions at once,
// each echoing small messages, then the same sessions at rest.

import (
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// openSessions opens n sessions through r whose desktops echo, and returns
// them with a function that closes them all.
func openSessions(b *testing.B, r *benchRelay, desk *desktops, n int) ([]*benchClient, func()) {
	clients := make([]*benchClient, 0, n)
	var wg sync.WaitGroup
	var conns []net.Conn
	for range n {
		c := dialClient(b, r)
		clients = append(clients, c)
		d := desk.accept(b)
		conns = append(conns, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunk)
			for {
				n, err := d.Read(buf)
				if n > 0 {
					if _, werr := d.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return clients, func() {
		for _, c := range clients {
			c.close()
		}
		for _, d := range conns {
			d.Close()
		}
		wg.Wait()
	}
}

// echoRounds runs rounds echoes on each of clients, each sending an
// echoSize message every echoEvery (phases spread at random) and waiting
// for its echo, and returns the round trips.
func echoRounds(clients []*benchClient, rounds int) ([]time.Duration, error) {
	rtts := make([][]time.Duration, len(clients))
	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame := c.frame(make([]byte, echoSize))
			back := make([]byte, echoSize)
			phase := time.Duration(rand.Int64N(int64(echoEvery)))
			own := make([]time.Duration, 0, rounds)
			for k := range rounds {
				if wait := time.Until(start.Add(phase + time.Duration(k)*echoEvery)); wait > 0 {
					time.Sleep(wait)
				}
				t0 := time.Now()
				if _, err := c.conn.Write(frame); err != nil {
					errs <- err
					return
				}
				if err := c.readFull(back); err != nil {
					errs <- err
					return
				}
				own = append(own, time.Since(t0))
			}
			rtts[i] = own
		}()
	}
	wg.Wait()
	close(errs)
	return slices.Concat(rtts...), <-errs
}

// benchEcho measures echo round trips with echoSessions sessions on each
// relay, the relays taking turns (see echoSlices), and reports each one's
// p50 and p99 in microseconds (<relay>-p50-us, <relay>-p99-us). Taking
// several seconds, it runs once.
func benchEcho(b *testing.B, relays map[string]*benchRelay, desk *desktops) {
	clients := make(map[string][]*benchClient)
	for _, k := range relayKinds {
		c, closeAll := openSessions(b, relays[k], desk, echoSessions)
		defer closeAll()
		clients[k] = c
	}
	rtts := make(map[string][]time.Duration)
	b.ResetTimer()
	for slice := range echoSlices {
		for i := range relayKinds {
			k := relayKinds[(slice+i)%len(relayKinds)]
			got, err := echoRounds(clients[k], echoSliceRounds)
			if err != nil {
				b.Fatalf("%s: %v", k, err)
			}
			rtts[k] = append(rtts[k], got...)
		}
	}
	b.StopTimer()
	for _, k := range relayKinds {
		all := rtts[k]
		slices.Sort(all)
		pct := func(p float64) float64 {
			return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds())
		}
		b.ReportMetric(pct(0.50), k+"-p50-us")
		b.ReportMetric(pct(0.99), k+"-p99-us")
	}
	b.ReportMetric(echoSessions, "sessions")
	b.ReportMetric(0, "ns/op")
}

// benchIdle opens echoSessions sessions through r, moves 32 KiB each way
// on each (a console that was busy, then left alone), waits, and reports
// how much a fresh relay process tree grew per session. Taking over two
// seconds, it runs once.
func benchIdle(b *testing.B, r *benchRelay, desk *desktops) {
	// A fresh process: what the earlier runs left in the heap would blur it.
	r = startRelay(b, r.kind, desk.ln.Addr().String())
	defer r.close()
	warm, closeWarm := openSessions(b, r, desk, 1)
	if _, err := warm[0].conn.Write(warm[0].frame(make([]byte, chunk))); err != nil {
		b.Fatal(err)
	}
	if err := warm[0].readFull(make([]byte, chunk)); err != nil {
		b.Fatal(err)
	}
	closeWarm()
	time.Sleep(500 * time.Millisecond)
	before := r.memory(b)
	clients, closeAll := openSessions(b, r, desk, echoSessions)
	defer closeAll()
	msg := make([]byte, chunk)
	back := make([]byte, chunk)
	for _, c := range clients {
		if _, err := c.conn.Write(c.frame(msg)); err != nil {
			b.Fatal(err)
		}
		if err := c.readFull(back); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	after := r.memory(b)
	if after < before {
		after = before
	}
	b.ReportMetric(float64(after-before)/float64(len(clients))/1024, "KiB/session")
	b.ReportMetric(float64(len(clients)), "sessions")
	b.ReportMetric(0, "ns/op")
}
