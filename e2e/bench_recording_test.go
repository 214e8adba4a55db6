package e2e

import (
	be "encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// cpuSeconds returns the CPU time (user + system) process pid has used.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	_, f, err := procStat(pid)
	if err != nil {
		tb.Fatal(err)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// vncViewer runs an RFB client on ws for d the way noVNC asks: security
// None, Tight/ZRLE/Hextile/CopyRect/Raw, an update request every period
// (incremental, or for the whole screen), everything read and dropped. It
// returns the bytes the portal sent.
func vncViewer(t *testing.T, ws *websocket.Conn, d, period time.Duration, incremental bool) int64 {
	t.Helper()
	var got []byte
	var total int64
	read := func(n int) []byte {
		for len(got) < n {
			_, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("RFB handshake: %v", err)
			}
			total += int64(len(b))
			got = append(got, b...)
		}
		out := got[:n]
		got = got[n:]
		return out
	}
	send := func(b []byte) { ws.WriteMessage(websocket.BinaryMessage, b) }
	ws.SetReadDeadline(time.Now().Add(d + 10*time.Second))
	read(12)
	send([]byte("RFB 003.008\n"))
	read(int(read(1)[0]))
	send([]byte{1})
	read(4)
	send([]byte{1})
	init := read(24)
	w, h := be.BigEndian.Uint16(init[0:]), be.BigEndian.Uint16(init[2:])
	read(int(be.BigEndian.Uint32(init[20:])))
	encodings := []int32{7, 16, 5, 1, 0, -256 + 6, -32 + 6} // Tight, ZRLE, Hextile, CopyRect, Raw; compression 6, quality 6
	enc := []byte{2, 0, 0, byte(len(encodings))}
	for _, e := range encodings {
		enc = be.BigEndian.AppendUint32(enc, uint32(e))
	}
	send(enc)
	request := func(incremental byte) []byte {
		return []byte{3, incremental, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)}
	}
	send(request(0))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		inc := byte(0)
		if incremental {
			inc = 1
		}
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				send(request(inc))
			}
		}
	}()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ws.SetReadDeadline(end)
		_, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		total += int64(len(b))
	}
	close(stop)
	<-done
	return total
}

// TestBench_RecordedVNC measures, for `make bench`, what recording costs a
// VNC session: the portal's CPU and the bytes per minute of a busy session
// (an xterm scrolling as fast as it can) on an unrecorded and a recorded
// pool, one after the other in the same run. Skipped unless
// CORRAL_VDI_BENCH=1; CORRAL_VDI_BENCH_SECONDS sets each session's length.
func TestBench_RecordedVNC(t *testing.T) {
	if os.Getenv("CORRAL_VDI_BENCH") != "1" {
		t.Skip("a benchmark: set CORRAL_VDI_BENCH=1 (make bench)")
	}
	secs, _ := strconv.Atoi(os.Getenv("CORRAL_VDI_BENCH_SECONDS"))
	if secs <= 0 {
		secs = 20
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	pid := p.cmd.Process.Pid
	desktops := map[string]string{}
	for _, pool := range []struct {
		name   string
		policy string
	}{{"plain", `{}`}, {"recorded", `{"record": true}`}} {
		if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "`+pool.name+`", "size": 1, "policy": `+pool.policy+`}`, nil); code != 201 {
			t.Fatalf("create pool %s: %d", pool.name, code)
		}
		var d desktop
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/"+pool.name+"/claim", &d); code != 200 {
			t.Fatalf("claim %s: %d", pool.name, code)
		}
		desktops[pool.name] = d.Name
		term, _, err := dialWS(p, "alice", "/ws/terminal/local/"+d.Name, p.URL)
		must(t, err)
		defer term.Close()
		term.WriteMessage(websocket.TextMessage, []byte("xterm -geometry 160x50+0+0 -e sh -c 'while :; do seq 1 100000; done' & echo started-$((1+1))\r"))
		readUntilWS(t, term, "started-2", 10*time.Second)
		go func() { // drain the terminal so it never blocks the shell
			for {
				if _, _, err := term.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second) // the xterms map and start scrolling
	seen := map[string]bool{}
	for _, load := range []struct {
		name        string
		period      time.Duration
		incremental bool
	}{{"scrolling", 33 * time.Millisecond, true}, {"full-frames", 100 * time.Millisecond, false}} {
		for _, pool := range []string{"plain", "recorded"} {
			member := desktops[pool]
			vnc, _, err := dialWS(p, "alice", "/ws/vnc/local/"+member, p.URL)
			must(t, err)
			cpu0, t0 := cpuSeconds(t, pid), time.Now()
			relayed := vncViewer(t, vnc, time.Duration(secs)*time.Second, load.period, load.incremental)
			cpu, wall := cpuSeconds(t, pid)-cpu0, time.Since(t0)
			vnc.Close()
			perMin := time.Minute.Seconds() / wall.Seconds()
			line := fmt.Sprintf("BENCH vnc %-11s %-8s portal CPU %6.2f s/min  relayed %7.1f MB/min", load.name, pool, cpu*perMin, float64(relayed)*perMin/1e6)
			if pool == "recorded" {
				waitFor(t, 10*time.Second, "the VNC recording to end", func() bool {
					var rows []api.Recording
					p.API(t, "ops", "GET", "/api/vdi/recordings?desktop=local/"+member, &rows)
					for _, r := range rows {
						if r.Protocol == "vnc" && r.End != nil && !seen[r.ID] {
							seen[r.ID] = true
							line += fmt.Sprintf("  recording %7.1f MB/min (%.2fx relayed)", float64(r.Bytes)*perMin/1e6, float64(r.Bytes)/float64(relayed))
							return true
						}
					}
					return false
				})
			}
			fmt.Println(line)
			t.Log(line)
		}
	}
}
