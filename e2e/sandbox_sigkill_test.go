package e2e

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// TestSandbox_PortalSIGKILL kills a portal with SIGKILL (the OOM killer, a
// node failure) while a desktop runs, and once in the middle of a claim's
// start: the next portal on the same data adopts the running desktop
// (the same Xvnc, one pasta, a console that answers) and leaves nothing of
// the half-started one behind; when it stops its desktops, no process of
// the data dir's desktops is left (no orphan Xvnc, pasta or bubblewrap).
// It runs with the portal as root and as nobody.
func TestSandbox_PortalSIGKILL(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody")
	}
	testnet.TunForAll(t)
	for _, c := range []struct {
		name  string
		start func(testing.TB, string, ...string) *Portal
	}{{"root", mustStartPortalIn}, {"nobody", startPortalAsNobodyIn}} {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.MkdirTemp("", "cvd")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeData(data) })
			env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=false"}
			first := c.start(t, data, env...)
			var d desktop
			if code := first.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Power != "running" {
				t.Fatalf("claim: %d %+v", code, d)
			}
			xvnc := recordedPID(t, first, d.Name, "Xvnc")
			// bob's claim is under way when the portal dies.
			go func() {
				req, _ := http.NewRequest("POST", first.URL+"/api/vdi/pools/local/demo/claim", nil)
				req.Header.Set("Tailscale-User-Login", "bob")
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}()
			time.Sleep(150 * time.Millisecond)
			before := sigkill(t, first)
			if !alive(xvnc) {
				t.Fatalf("Xvnc %d died with the SIGKILLed portal; desktops outlive their portal", xvnc)
			}
			t.Logf("left by the SIGKILLed portal: %d processes, %d Xvnc, %d pasta", len(before), count(before, "Xvnc"), count(before, "pasta"))

			second := c.start(t, data, "CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_ADMINS=admin", "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true")
			var after desktop
			if code := second.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d.Name, &after); code != 200 || after.Power != "running" {
				t.Fatalf("alice's desktop after the SIGKILL: %d %+v; want running", code, after)
			}
			if got := recordedPID(t, second, d.Name, "Xvnc"); got != xvnc {
				t.Errorf("Xvnc after the SIGKILL is %d; want the adopted %d", got, xvnc)
			}
			ws, _, err := dialConsole(second, "alice", d.Name, second.URL)
			if err != nil {
				t.Fatalf("alice's console after the SIGKILL: %v", err)
			}
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "RFB 003.008\n" {
				t.Errorf("alice's console after the SIGKILL: %q %v; want the RFB banner", msg, err)
			}
			ws.Close()
			// Every Xvnc and pasta alive (the first portal's or the
			// second's) belongs to a desktop the portal says runs: the
			// half-started one is adopted or gone, nothing runs twice.
			var all []desktop
			second.API(t, "admin", "GET", "/api/vdi/desktops?all=1", &all)
			running := 0
			for _, x := range all {
				if x.Power == "running" {
					running++
				}
			}
			live := descendants(second.cmd.Process.Pid)
			now := procs()
			for pid, pr := range before {
				if n, ok := now[pid]; ok && n.start == pr.start {
					live[pid] = pr
				}
			}
			for _, name := range []string{"Xvnc", "pasta"} {
				want := running
				if name == "pasta" && c.name == "nobody" {
					want = 0 // a portal that is not root gives desktops no network
				}
				if n := count(live, name); n != want {
					t.Errorf("%d %s processes after the restart, for %d running desktops %+v; want %d", n, name, running, all, want)
				}
			}
			second.Stop(t)
			// What dies with its parent (bubblewrap's --die-with-parent)
			// may take a moment to go.
			var left []string
			if !eventually(10*time.Second, func() bool { left = stillAlive(live); return len(left) == 0 }) {
				t.Errorf("after the portal stopped its desktops, these are left: %s", strings.Join(left, "; "))
			}
		})
	}
}

// sigkill ends p with SIGKILL and waits for it. It returns what p had
// started (its descendants, named by pid and start time) just before.
func sigkill(t *testing.T, p *Portal) map[int]proc {
	t.Helper()
	kids := descendants(p.cmd.Process.Pid)
	p.cmd.Process.Kill()
	p.cmd.Wait()
	return kids
}

// proc is a process as /proc/PID/stat names it.
type proc struct {
	comm  string
	ppid  int
	start string // start time since boot, in clock ticks: a reused pid has another
}

// procs reads every live process.
func procs() map[int]proc {
	ents, _ := os.ReadDir("/proc")
	out := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, f, err := procStat(pid) // state ppid ... starttime is the 20th
		if err != nil || len(f) < 20 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = proc{comm: comm, ppid: ppid, start: f[19]}
	}
	return out
}

// descendants returns every live process below pid.
func descendants(pid int) map[int]proc {
	all := procs()
	out := map[int]proc{}
	for grew := true; grew; {
		grew = false
		for p, pr := range all {
			if _, seen := out[p]; !seen && (pr.ppid == pid || out[pr.ppid] != (proc{})) {
				out[p], grew = pr, true
			}
		}
	}
	return out
}

// stillAlive returns those of ps that are alive (same pid, same start).
func stillAlive(ps map[int]proc) []string {
	now := procs()
	var out []string
	for pid, pr := range ps {
		if n, ok := now[pid]; ok && n.start == pr.start {
			out = append(out, pr.comm+" "+strconv.Itoa(pid))
		}
	}
	return out
}

// count counts the processes named comm among ps. Debian's pasta is
// passt under another name, and runs as passt.avx2 where the CPU has it.
func count(ps map[int]proc, comm string) int {
	if comm == "pasta" {
		comm = "passt"
	}
	n := 0
	for _, pr := range ps {
		if pr.comm == comm || strings.HasPrefix(pr.comm, comm+".") {
			n++
		}
	}
	return n
}
