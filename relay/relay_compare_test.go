package relay_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// The relay comparison runs three relays, each in its own process, between
// a client and a desktop that both live in the benchmark's process:
//
//   - "portal": relay.Pipe behind relay.Upgrader, as a console websocket
//     runs in the portal (input detection and keepalive on);
//   - "tcp": a plain two-hop Go TCP relay (accept, dial, io.Copy both
//     ways), the ceiling a websocket relay is held to;
//   - "websockify": Debian's websockify, what noVNC setups often use.
//
// Each sub-benchmark measures one thing on all three in a row, so their
// ratios come from the same run on the same (possibly busy) machine.
// Benchmarks report figures; they never assert times.

// Environment of a relay process started by the comparison: the mode
// ("portal" or "tcp") and the desktop's address.
const (
	serveEnv  = "CORRAL_RELAY_BENCH_SERVE"
	targetEnv = "CORRAL_RELAY_BENCH_TARGET"
)

// Shape of the comparison's workloads.
const (
	echoSessions = 200                   // sessions of the latency and memory runs
	echoSize     = 256                   // bytes of one echoed message (input events, small updates)
	echoEvery    = 20 * time.Millisecond // one echo per session this often
)

// relayKinds are the relays compared, the baseline first.
var relayKinds = []string{"tcp", "portal", "websockify"}

// serveBenchRelay is the main of a relay process: it listens on loopback,
// prints its address and relays every connection to target until its
// standard input closes.
func serveBenchRelay(mode, target string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	switch mode {
	case "tcp":
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer d.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(d, c)
					d.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				io.Copy(c, d)
				c.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	case "portal":
		up := relay.Upgrader(func(*http.Request) bool { return true })
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			conn, err := net.Dial("tcp", target)
			if err != nil {
				ws.Close()
				return
			}
			detector := relay.NewInputDetector("vnc")
			relay.Pipe(r.Context(), ws, conn, relay.Options{
				OnInput:   func(p []byte) { detector.Feed(p) },
				PingEvery: 20 * time.Second,
			})
		})}
		srv.Serve(ln)
		return 1
	}
	fmt.Fprintf(os.Stderr, "unknown relay mode %q\n", mode)
	return 2
}

// benchRelay is one relay process under comparison.
type benchRelay struct {
	kind string
	addr string
	cmd  *exec.Cmd
	stop io.Closer
}

// startRelay starts a relay of kind in front of the desktop at target.
func startRelay(tb testing.TB, kind, target string) *benchRelay {
	tb.Helper()
	r := &benchRelay{kind: kind}
	switch kind {
	case "websockify":
		path, err := exec.LookPath("websockify")
		if err != nil {
			tb.Skip("websockify is not installed (scripts/deps.sh --test installs it)")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		r.addr = ln.Addr().String()
		ln.Close()
		r.cmd = exec.Command(path, r.addr, target)
		stdin, err := r.cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		r.stop = stdin
		if err := r.cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.Dial("tcp", r.addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				r.close()
				tb.Fatalf("websockify did not listen on %s", r.addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	default:
		r.cmd = exec.Command(os.Args[0], "-test.run=^$")
		r.cmd.Env = append(os.Environ(), serveEnv+"="+kind, targetEnv+"="+target)
		r.cmd.Stderr = os.Stderr
		stdin, err := r.cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		r.stop = stdin
		stdout, err := r.cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := r.cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			r.close()
			tb.Fatalf("%s relay: %v", kind, err)
		}
		r.addr = strings.TrimSpace(line)
	}
	tb.Cleanup(r.close)
	return r
}

// close stops the relay process and its children.
func (r *benchRelay) close() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.stop.Close()
	for _, pid := range descendants(r.cmd.Process.Pid) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}

// memory returns the proportional set size of the relay process and all
// its descendants (websockify forks one process per connection), in bytes.
func (r *benchRelay) memory(tb testing.TB) int64 {
	tb.Helper()
	var total int64
	for _, pid := range append([]int{r.cmd.Process.Pid}, descendants(r.cmd.Process.Pid)...) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			continue // gone meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}

// cpu returns the CPU time the relay process tree has used so far.
func (r *benchRelay) cpu() time.Duration {
	var total time.Duration
	for _, pid := range append([]int{r.cmd.Process.Pid}, descendants(r.cmd.Process.Pid)...) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				total += time.Duration(ns)
			}
		}
	}
	return total
}

// reportCPU reports the relay's CPU time per MB moved since before.
func reportCPU(b *testing.B, r *benchRelay, before time.Duration, bytes int64) {
	b.ReportMetric(float64((r.cpu()-before).Microseconds())/(float64(bytes)/1e6), "relay-cpu-us/MB")
}

// descendants returns the pids of every descendant of pid.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// BenchmarkRelays compares the portal's relay with a plain TCP relay and
// websockify, each in its own process: throughput both ways (MB/s, and the
// relay's CPU per MB), echo latency with echoSessions sessions on each
// (<relay>-p50-us, <relay>-p99-us) and memory per idle session
// (KiB/session). scripts/bench.sh turns them into ratios.
func BenchmarkRelays(b *testing.B) {
	desk := startDesktops(b)
	relays := make(map[string]*benchRelay)
	for _, k := range relayKinds {
		relays[k] = startRelay(b, k, desk.ln.Addr().String())
	}
	each := func(name string, run func(*testing.B, *benchRelay, *desktops)) {
		for _, k := range relayKinds {
			b.Run(name+"/relay="+k, func(b *testing.B) { run(b, relays[k], desk) })
		}
	}
	each("out", benchThroughputOut)
	each("in", benchThroughputIn)
	b.Run("echo", func(b *testing.B) { benchEcho(b, relays, desk) })
	each("idle", benchIdle)
}

// benchThroughputOut sends 32 KiB desktop writes through r to the client.
func benchThroughputOut(b *testing.B, r *benchRelay, desk *desktops) {
	c := dialClient(b, r)
	defer c.close()
	d := desk.accept(b)
	defer d.Close()
	want := int64(b.N) * chunk
	done := drain(c.read, want, "client")
	data := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ResetTimer()
	cpu0 := r.cpu()
	for range b.N {
		if _, err := d.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	reportCPU(b, r, cpu0, want)
}

// drain reads from read, in the background, until want bytes came; the
// channel answers nil then, or what went wrong, naming who read.
func drain(read func([]byte) (int, error), want int64, who string) <-chan error {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, chunk)
		var got int64
		for got < want {
			n, err := read(buf)
			got += int64(n)
			if err != nil {
				done <- fmt.Errorf("%s got %d bytes of %d: %w", who, got, want, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// benchThroughputIn sends 32 KiB client messages through r to the desktop.
func benchThroughputIn(b *testing.B, r *benchRelay, desk *desktops) {
	c := dialClient(b, r)
	defer c.close()
	d := desk.accept(b)
	defer d.Close()
	want := int64(b.N) * chunk
	done := drain(d.Read, want, "desktop")
	frame := c.frame(make([]byte, chunk))
	b.SetBytes(chunk)
	b.ResetTimer()
	cpu0 := r.cpu()
	for range b.N {
		if _, err := c.conn.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	reportCPU(b, r, cpu0, want)
}

// Echo slices: each relay's echo runs in echoSlices slices of echoRounds
// rounds, the relays taking turns (in a rotating order), so that a burst
// of load from elsewhere on the machine falls on all of them alike.
const (
	echoSlices      = 6
	echoSliceRounds = 15 // 0.3 s
)
