package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// A desktop whose processes died (pasta, the netns sleeper, or all) starts
// again with its outbound network: the stop removed its cgroup, which the
// next start must make again (it once waited 5 s for a network holder that
// could not join the missing cgroup, and the claim failed).
func TestSandboxedDesktop_RestartAfterCrash(t *testing.T) {
	s := MustSandbox(t, "202300-202399", Limits{NProc: 300})
	if m := s.NetworkMissing(); m != "" {
		t.Skip(m)
	}
	outside := testnet.OutsideURL(t)
	spec := MustSandboxedSpec(t, s, "crash")
	spec.Network = NetworkOutbound
	for _, kill := range []string{netPasta, netnsHolder, "all"} {
		t.Run(kill, func(t *testing.T) {
			d := MustStartDesktop(t, spec)
			for _, p := range d.procs {
				if kill == "all" || p.Name == kill {
					p.signal(9)
				}
			}
			if kill == "all" {
				select {
				case <-d.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the desktop did not end after its processes were killed")
				}
			}
			begin := time.Now()
			d2, err := StartDesktop(context.Background(), spec, testLogger(t))
			if err != nil {
				t.Fatalf("start after %s was killed: %v", kill, err)
			}
			t.Logf("restarted in %v", time.Since(begin).Round(time.Millisecond))
			term, err := d2.StartTerminal()
			if err != nil {
				t.Fatal(err)
			}
			defer term.Close()
			term.Write([]byte("echo \"AGAIN $(curl -s -m 5 " + outside + ")\"; echo DONE-$((40+2))\r"))
			if out := readUntil(t, term, "DONE-42"); !strings.Contains(out, "AGAIN reached") {
				t.Errorf("after the restart the terminal said %q; want the server reached", out)
			}
			if err := d2.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A crashed desktop's clean-up that runs after the member's next start
// made its cgroup again (the start kills the old Xvnc, and the old
// desktop's watcher sees it only then) leaves the new folder: CI saw the
// restart fail "cgroup.procs: Directory nonexistent" when the clean-up
// read the generation late, and the old desktop's Stop removed the folder
// whatever its generation.
func TestSandboxedDesktop_LateCleanupKeepsTheNextStartsCgroup(t *testing.T) {
	s := MustSandbox(t, "202400-202499", Limits{NProc: 300, Memory: 512 << 20})
	if m := s.MissingLimits(); m != "" {
		t.Skip(m)
	}
	spec := MustSandboxedSpec(t, s, "late")
	old := MustStartDesktop(t, spec)
	cg := spec.User.cgroup()
	if err := cg.make(); err != nil { // the next start's, before the old one's end is seen
		t.Fatal(err)
	}
	t.Cleanup(cg.remove)
	old.procs[0].signal(9)
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the desktop did not end after its Xvnc was killed")
	}
	old.Stop() // waits for the crash's clean-up too
	for _, dir := range []string{cg.v2, cg.memory, cg.pids} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			t.Errorf("the old desktop's clean-up removed the next start's cgroup: %v", err)
		}
	}
}
