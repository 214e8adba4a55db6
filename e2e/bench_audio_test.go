package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestBench_Audio measures, for `make bench`, what one desktop's sound
// costs while a tone plays: bytes per second on the audio websocket, the
// portal's CPU and the encoder's inside the desktop, for 1 and for 4
// listeners. Skipped unless CORRAL_VDI_BENCH=1; CORRAL_VDI_BENCH_SECONDS
// sets each measurement's length.
func TestBench_Audio(t *testing.T) {
	if os.Getenv("CORRAL_VDI_BENCH") != "1" {
		t.Skip("a benchmark: set CORRAL_VDI_BENCH=1 (make bench)")
	}
	secs, _ := strconv.Atoi(os.Getenv("CORRAL_VDI_BENCH_SECONDS"))
	if secs <= 0 {
		secs = 10
	}
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	d := mustClaim(t, p, "alice", "demo")
	shell := openGuestShell(t, p, "alice", d.Name)
	waitFor(t, 15*time.Second, "the desktop's sound server", func() bool {
		return !strings.Contains(shell.run("pactl info >/dev/null 2>&1 || echo NO''SOUND"), "NOSOUND")
	})
	shell.run("pactl load-module module-sine sink=corral frequency=440")
	for _, n := range []int{1, 4} {
		var conns []*websocket.Conn
		received := make(chan int, n)
		for range n {
			ws, res, err := dialWS(p, "alice", "/ws/audio/local/"+d.Name, p.URL)
			if err != nil {
				t.Fatalf("audio socket: %v (%v)", err, status(res))
			}
			conns = append(conns, ws)
		}
		time.Sleep(2 * time.Second) // past the encoders' start
		cpu0, t0 := cpuSeconds(t, p.cmd.Process.Pid), time.Now()
		enc0 := encoderCPU(t)
		for _, ws := range conns {
			go func() {
				total := 0
				ws.SetReadDeadline(time.Now().Add(time.Duration(secs) * time.Second))
				for {
					_, b, err := ws.ReadMessage()
					if err != nil {
						break
					}
					total += len(b)
				}
				received <- total
			}()
		}
		total := 0
		for range n {
			total += <-received
		}
		wall := time.Since(t0).Seconds()
		cpu, enc := cpuSeconds(t, p.cmd.Process.Pid)-cpu0, encoderCPU(t)-enc0
		for _, ws := range conns {
			ws.Close()
		}
		fmt.Printf("BENCH audio %d listener(s): %5.0f kbit/s each  portal CPU %5.1f ms/s per stream  encoders' CPU %5.1f ms/s per stream\n",
			n, float64(total)*8/1000/wall/float64(n), cpu*1000/wall/float64(n), enc*1000/wall/float64(n))
	}
}

// encoderCPU returns the CPU seconds of every gst-launch process now
// running (the desktops' sound encoders).
func encoderCPU(t *testing.T) float64 {
	ents, _ := os.ReadDir("/proc")
	var sum float64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "gst-launch-1.0" {
			sum += cpuSeconds(t, pid)
		}
	}
	return sum
}
