package soak

// The kube phase's faults: a replica killed mid-storm, the API server
// restarted, etcd paused; each judged by what its users saw.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func faultKillReplica(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx := context.Background()
	held, err := hold(ctx, e, sc.Hold, "kill")
	if err != nil {
		r.add("fault", "SIGKILL replica: claims before", false, "all 200", "%v", err)
		return
	}
	victim := e.replicas[1]
	// One holder has a terminal open through the victim (kubectl exec
	// through the apiserver to the kubelet stand-in's real shell).
	var user, member string
	for user, member = range held {
		break
	}
	ws, err := dialTerminalIn(victim.URL, user, e.ns, member)
	if err == nil {
		err = echoOnce(ws, "before", 20*time.Second)
	}
	r.add("fault", "SIGKILL replica: console open through it", err == nil, "terminal answers", "%s", errOr(err, "ok"))
	victim.kill()
	if ws != nil {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, rerr := ws.ReadMessage()
		for rerr == nil {
			_, _, rerr = ws.ReadMessage()
		}
		ws.Close()
		again, err := dialTerminalIn(e.replicas[0].URL, user, e.ns, member)
		if err == nil {
			err = echoOnce(again, "after", 20*time.Second)
			again.Close()
		}
		r.add("fault", "SIGKILL replica: its console drops, reconnects via another", err == nil, "terminal answers via replica 0", "%s", errOr(err, "ok"))
	}
	time.Sleep(2 * time.Second)
	lost, err := e.kept(ctx, held)
	r.add("fault", "SIGKILL replica: no Lease lost", lost == 0 && err == nil, "0 of "+fmt.Sprint(len(held)), "%d lost %v", lost, err)
	served := 0
	for user, member := range held {
		code, buf, _ := call(ctx, e.replicas[2].URL, user, "GET", "/api/vdi/desktops", "")
		ds, _ := decode[[]desktop](buf)
		for _, d := range ds {
			if code == 200 && d.Name == member {
				served++
			}
		}
	}
	r.add("fault", "SIGKILL replica: another serves its users", served == len(held), "all holders see their desktop", "%d of %d", served, len(held))
	err = e.claimRelease(ctx, e.replicas[0], "after-kill")
	r.add("fault", "SIGKILL replica: claims go on", err == nil, "claim+release 200", "%v", errOr(err, "ok"))
	// The replica comes back on its own data dir, as its Deployment would.
	start := time.Now()
	back, err := launch(t, victim.Data, "127.0.0.1:0", victim.env)
	if err == nil {
		e.replicas[1] = back
		err = e.claimRelease(ctx, back, "after-restart")
	}
	r.add("fault", "SIGKILL replica: restarted one serves", err == nil, "within 60 s", "%s %v", time.Since(start).Round(100*time.Millisecond), errOr(err, ""))
	e.releaseAll(ctx, held)
}

func faultAPIServerRestart(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx := context.Background()
	held, err := hold(ctx, e, sc.Hold, "api")
	if err != nil {
		r.add("fault", "apiserver restart: claims before", false, "all 200", "%v", err)
		return
	}
	restarted := make(chan error, 1)
	go func() { restarted <- e.cluster.RestartAPIServer(3 * time.Second) }()
	// A blip shorter than a minute keeps the replicas in the Service: their
	// /readyz stays 200 and says what is degraded (users get pages that
	// explain, never the ingress's bare 503).
	type probe struct {
		notReady int
		degraded bool
	}
	probed := make(chan probe, 1)
	go func() {
		var pr probe
		for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			code, buf, _ := call(ctx, e.replicas[0].URL, "", "GET", "/readyz", "")
			if code != http.StatusOK {
				pr.notReady++
			}
			pr.degraded = pr.degraded || bytes.Contains(buf, []byte("degraded"))
		}
		probed <- pr
	}()
	// While it is down a claim is refused with an error, not hung.
	time.Sleep(1500 * time.Millisecond)
	t0 := time.Now()
	code, _, _ := call(ctx, e.replicas[0].URL, "during-api", "POST", e.claimPath(), "")
	during := time.Since(t0)
	r.add("fault", "apiserver down: claim answered with an error", code >= 500 && during < 30*time.Second, "5xx within 30 s",
		"%d in %s", code, during.Round(time.Millisecond))
	pr := <-probed
	r.add("fault", "apiserver blip: replica stays in the Service", pr.notReady == 0, "/readyz 200 through a 3 s outage",
		"%d probes not ready; degraded said: %t", pr.notReady, pr.degraded)
	var buf []byte
	took, ok := eventually(10*time.Second, func() bool {
		code, buf, _ = call(ctx, e.replicas[1].URL, "during-api", "GET", "/", "")
		return strings.Contains(string(buf), `data-testid="outage"`)
	})
	r.add("fault", "apiserver down: the home page says so", ok, "a notice on the page within 10 s",
		"%d after %s: %.160s", code, took.Round(100*time.Millisecond), outageText(buf))
	if err := <-restarted; err != nil {
		r.add("fault", "apiserver restart", false, "restarted", "%v", err)
		return
	}
	took, ok = eventually(120*time.Second, func() bool {
		for _, p := range e.replicas {
			if code, _, _ := call(ctx, p.URL, "", "GET", "/readyz", ""); code != http.StatusOK {
				return false
			}
		}
		return true
	})
	r.add("fault", "apiserver restart: every replica ready again", ok, "within 120 s", "after %s", took.Round(100*time.Millisecond))
	took, ok = eventually(120*time.Second, func() bool {
		for _, p := range e.replicas {
			if e.claimRelease(ctx, p, "after-api") != nil {
				return false
			}
		}
		return true
	})
	r.add("fault", "apiserver restart: claims resume on every replica", ok, "within 120 s", "after %s", took.Round(100*time.Millisecond))
	lost, err := e.kept(ctx, held)
	r.add("fault", "apiserver restart: no Lease lost", lost == 0 && err == nil, "0 of "+fmt.Sprint(len(held)), "%d lost %v", lost, err)
	e.releaseAll(ctx, held)
}

func faultEtcdPause(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx := context.Background()
	pid, err := e.cluster.EtcdPID()
	if err != nil {
		r.add("fault", "etcd paused", false, "found", "%v", err)
		return
	}
	held, err := hold(ctx, e, sc.Hold, "etcd")
	if err != nil {
		r.add("fault", "etcd pause: claims before", false, "all 200", "%v", err)
		return
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	resumed := time.AfterFunc(sc.EtcdStop, func() { syscall.Kill(pid, syscall.SIGCONT) })
	defer func() { resumed.Stop(); syscall.Kill(pid, syscall.SIGCONT) }()
	// Claims made while etcd sleeps: each answered (any status) within 60 s.
	var wg sync.WaitGroup
	var answered, refused atomic.Int64
	var slowest atomic.Int64
	for i := range 6 {
		wg.Go(func() {
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			code, buf, _ := call(cctx, e.replicas[i%3].URL, fmt.Sprintf("during-etcd%d", i), "POST", e.claimPath(), "")
			if code != 0 {
				answered.Add(1)
			}
			if code == 200 {
				d, _ := decode[desktop](buf)
				call(ctx, e.replicas[0].URL, fmt.Sprintf("during-etcd%d", i), "POST", e.releasePath(d.Name), "")
			} else {
				refused.Add(1)
			}
			for d := int64(time.Since(t0)); ; {
				old := slowest.Load()
				if d <= old || slowest.CompareAndSwap(old, d) {
					break
				}
			}
		})
	}
	wg.Wait()
	r.add("fault", fmt.Sprintf("etcd SIGSTOP %s: claims during it answered", sc.EtcdStop), answered.Load() == 6, "6 of 6 within 60 s",
		"%d of 6 (%d refused), slowest %s", answered.Load(), refused.Load(), time.Duration(slowest.Load()).Round(100*time.Millisecond))
	took, ok := eventually(60*time.Second, func() bool { return e.claimRelease(ctx, e.replicas[2], "after-etcd") == nil })
	r.add("fault", "etcd SIGCONT: claims resume", ok, "within 60 s", "after %s", took.Round(100*time.Millisecond))
	lost, err := e.kept(ctx, held)
	r.add("fault", "etcd pause: no Lease lost", lost == 0 && err == nil, "0 of "+fmt.Sprint(len(held)), "%d lost %v", lost, err)
	e.releaseAll(ctx, held)
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// outageText returns the outage notice of a page, or its start.
func outageText(page []byte) string {
	s := string(page)
	if i := strings.Index(s, `data-testid="outage">`); i >= 0 {
		s = s[i+len(`data-testid="outage">`):]
		if j := strings.Index(s, "<"); j >= 0 {
			return s[:j]
		}
	}
	return s
}
