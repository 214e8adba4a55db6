package local

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// TestDesktop_StartTime measures, in one run, a desktop's cold start
// (StartDesktop until Xvnc, the window manager, RDP and sound are up)
// unsandboxed, sandboxed without network and sandboxed with outbound
// network, three times each, and logs the medians with the load average:
// what the sandbox costs. It fails only when a desktop does not start.
func TestDesktop_StartTime(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	if err := CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	median := func(name string, spec func(i int) DesktopSpec) {
		var took []time.Duration
		for i := range 3 {
			s := spec(i)
			begin := time.Now()
			d, err := StartDesktop(context.Background(), s, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(begin))
			d.Stop()
		}
		slices.Sort(took)
		t.Logf("cold start %s: median %v (of %v)", name, took[1].Round(time.Millisecond), took)
	}
	median("unsandboxed", func(i int) DesktopSpec { return MustDesktopSpec(t, "plain") })
	if os.Geteuid() != 0 {
		t.Logf("load average %s", load)
		return
	}
	s := MustSandbox(t, "202600-202699", Limits{NProc: 300})
	median("sandboxed, network none", func(i int) DesktopSpec { return MustSandboxedSpec(t, s, "st") })
	if s.NetworkMissing() == "" {
		median("sandboxed, outbound", func(i int) DesktopSpec {
			spec := MustSandboxedSpec(t, s, "so")
			spec.Network = NetworkOutbound
			return spec
		})
	}
	t.Logf("load average before: %s", load)
}
