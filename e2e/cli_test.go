package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// cli runs the binary's admin subcommand args against p and returns its
// stdout, stderr and exit code.
func (p *Portal) cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"CORRAL_VDI_DATA_DIR=" + p.DataDir, "PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// mustCLI is cli that fails t unless the command exits 0.
func (p *Portal) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := p.cli(t, args...)
	if code != 0 {
		t.Fatalf("corral-vdi-portal %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fields returns the fields of the line of out whose first field is first.
func fields(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// TestCLI_Walkthrough runs the seed's walkthrough with the real binary
// against a running portal on the local backend, and checks each step
// against what the web shows: create 3, pool list, assign POOL USER,
// connect, unassign, delete; a web claim shows in pool list and the CLI's
// assignment on the user's home page.
func TestCLI_Walkthrough(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_AUTH=tailscale")

	if out := p.mustCLI(t, "pool", "create", "walk", "--from", "session", "--size", "3", "--ephemeral"); !contains(out, "created pool local/walk: 3 ephemeral ct desktops") {
		t.Fatalf("pool create printed %q", out)
	}
	var pools []pool
	if code := p.API(t, "erin", "GET", "/api/vdi/pools", &pools); code != 200 || len(pools) != 1 || pools[0].Free != 3 {
		t.Fatalf("the web's pools after create: %d %+v; want walk with 3 free", code, pools)
	}

	d := mustClaim(t, p, "erin", "walk")
	out := p.mustCLI(t, "pool", "list", "local/walk")
	if f := fields(out, "local/"+d.Name); len(f) < 4 || f[2] != "erin" || f[3] != "running" {
		t.Fatalf("pool list row of erin's %s: %q in\n%s", d.Name, f, out)
	}
	if n := strings.Count(out, " free "); n != 2 {
		t.Fatalf("pool list shows %d free desktops; want 2:\n%s", n, out)
	}

	out = p.mustCLI(t, "assign", "local/walk", "frank")
	member := strings.Fields(strings.TrimPrefix(out, "assigned "))[0]
	if !contains(out, "to frank (running)") || member == "local/"+d.Name {
		t.Fatalf("assign printed %q", out)
	}
	res, err := http.NewRequest("GET", p.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Set("Tailscale-User-Login", "frank")
	home, err := http.DefaultClient.Do(res)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(home.Body)
	home.Body.Close()
	if !contains(string(page), "/desktops/"+member) {
		t.Fatalf("frank's home page does not show %s", member)
	}

	out = p.mustCLI(t, "connect", member)
	if !contains(out, "open "+p.URL+"/desktops/"+member) || fields(out, "best") == nil {
		t.Fatalf("connect printed:\n%s", out)
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(p.mustCLI(t, "connect", member, "-json")), &c); err != nil || c["path"] != "direct" {
		t.Fatalf("connect -json: %v, %v; want path direct", c, err)
	}

	if _, errOut, code := p.cli(t, "unassign", "local/"+d.Name); code != 4 || !contains(errOut, "--force") {
		t.Fatalf("unassign of erin's own claim: exit %d %q; want 4 asking for --force", code, errOut)
	}
	p.mustCLI(t, "unassign", member)
	p.mustCLI(t, "unassign", "local/"+d.Name, "--force")
	var mine []desktop
	if p.API(t, "erin", "GET", "/api/vdi/desktops", &mine); len(mine) != 0 {
		t.Fatalf("erin still holds %+v after unassign --force", mine)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"assign", "local/nosuch", "frank"}, 3},
		{[]string{"pool", "list", "walk"}, 2},
		{[]string{"pool", "frobnicate"}, 2},
		{[]string{"connect", "-h"}, 0},
	} {
		if _, errOut, code := p.cli(t, tc.args...); code != tc.code {
			t.Errorf("corral-vdi-portal %s: exit %d (%s); want %d", strings.Join(tc.args, " "), code, errOut, tc.code)
		}
	}
	if out := p.mustCLI(t, "pool", "delete", "local/walk"); !contains(out, "deleted pool local/walk") {
		t.Fatalf("pool delete printed %q", out)
	}
	if out, _, code := p.cli(t, "assign", "local/walk", "frank"); code != 3 {
		t.Fatalf("assign after delete: exit %d %q; want 3", code, out)
	}
}

// TestCLI_WalkthroughKube is the walkthrough on the kube backend: a pool
// of three VMs cloned from a golden VM through the stand-in, the CLI and
// the web seeing each other's claims, connect naming the path, and the
// pool gone with its VMs at the end.
func TestCLI_WalkthroughKube(t *testing.T) {
	e := startKubeEnv(t)
	p := e.portal
	testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	pool := e.ns + "/walk"
	if out := p.mustCLI(t, "pool", "create", "walk", "--from", "golden", "--size", "3", "--ephemeral", "-n", e.ns); !contains(out, "created pool "+pool+": 3 ephemeral vm desktops") {
		t.Fatalf("pool create printed %q", out)
	}
	waitFor(t, time.Minute, "three members cloned", func() bool { return len(e.poolVMs(t, "walk")) == 3 })
	d := p.claimRunning(t, "erin", e.ns, "walk") // on the web
	out := p.mustCLI(t, "pool", "list", pool)
	if f := fields(out, e.ns+"/"+d.Name); len(f) < 4 || f[2] != "erin" || f[3] != "running" {
		t.Fatalf("pool list row of erin's %s: %q in\n%s", d.Name, f, out)
	}
	// The assign answers once the VM is asked to start (#55): running
	// already, or starting.
	out = p.mustCLI(t, "assign", pool, "frank")
	member := strings.Fields(strings.TrimPrefix(out, "assigned "))[0]
	if !contains(out, "to frank (running)") && !contains(out, "to frank (starting)") || member == e.ns+"/"+d.Name {
		t.Fatalf("assign printed %q", out)
	}
	var mine []desktop
	if p.API(t, "frank", "GET", "/api/vdi/desktops", &mine); len(mine) != 1 || e.ns+"/"+mine[0].Name != member {
		t.Fatalf("frank's desktops on the web: %+v; want %s", mine, member)
	}
	waitFor(t, 2*time.Minute, "frank's desktop running", func() bool {
		return p.API(t, "frank", "GET", "/api/vdi/desktops", &mine) == 200 && len(mine) == 1 && mine[0].Power == "running"
	})
	out = p.mustCLI(t, "connect", member)
	if f := fields(out, "best"); len(f) < 3 || (f[2] != "direct" && f[2] != "apiserver") {
		t.Fatalf("connect printed:\n%s", out)
	}
	p.mustCLI(t, "unassign", member)
	p.mustCLI(t, "unassign", e.ns+"/"+d.Name, "--force")
	// An ephemeral member's release answers before its reset ends (#55):
	// the list shows it free once the reset is done.
	waitFor(t, 2*time.Minute, "every member free after unassigning both", func() bool {
		return strings.Count(p.mustCLI(t, "pool", "list", pool), " free ") == 3
	})
	p.mustCLI(t, "pool", "delete", pool)
	waitFor(t, time.Minute, "the pool's VMs deleted", func() bool { return len(e.poolVMs(t, "walk")) == 0 })
}
