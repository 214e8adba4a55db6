package portal

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/cli"
)

// TestCLI_Walkthrough runs the seed's walkthrough over the admin socket of
// a running portal on the local backend, with a user claiming through the
// web API in between: create 3, pool list, assign POOL USER, connect,
// unassign, delete.
func TestCLI_Walkthrough(t *testing.T) {
	p := mustStartCLIPortal(t)

	out := p.mustCLI(t, "pool", "create", "walk", "--from", "session", "--size", "3", "--ephemeral", "-n", "local")
	if want := "created pool local/walk: 3 ephemeral ct desktops"; !strings.Contains(out, want) {
		t.Fatalf("pool create printed %q; want %q", out, want)
	}
	out = p.mustCLI(t, "pool", "list", "local/walk")
	for _, m := range []string{"local/walk-1", "local/walk-2", "local/walk-3"} {
		if f := row(out, m); len(f) < 4 || f[1] != "walk" || f[2] != "free" {
			t.Fatalf("pool list row of %s: %q; want free in\n%s", m, f, out)
		}
	}

	// A web claim shows in pool list.
	code, body := p.api(t, "carol", "POST", "/api/vdi/pools/local/walk/claim", "")
	if code != http.StatusOK {
		t.Fatalf("web claim: %d %s", code, body)
	}
	var web struct{ Name string }
	json.Unmarshal([]byte(body), &web)
	if f := row(p.mustCLI(t, "pool", "list"), "local/"+web.Name); len(f) < 4 || f[2] != "carol" || f[3] != "running" {
		t.Fatalf("pool list row of carol's %s: %q; want carol, running", web.Name, f)
	}

	// assign POOL USER picks a free member, starts it and says how to connect.
	out = p.mustCLI(t, "assign", "local/walk", "dave")
	if !strings.Contains(out, "to dave (running)") || !strings.Contains(out, "corral-vdi-portal connect local/walk-") {
		t.Fatalf("assign printed %q", out)
	}
	member := strings.Fields(strings.TrimPrefix(out, "assigned "))[0]
	if member == "local/"+web.Name {
		t.Fatalf("assign gave carol's %s to dave", member)
	}
	if again := p.mustCLI(t, "assign", "local/walk", "dave"); !strings.Contains(again, "dave holds "+member+" already") {
		t.Fatalf("assigning the pool to dave again printed %q; want his desktop back", again)
	}
	// ...and the web shows it to dave.
	code, body = p.api(t, "dave", "GET", "/api/vdi/desktops", "")
	if code != http.StatusOK || !strings.Contains(body, `"name":"`+strings.TrimPrefix(member, "local/")+`"`) {
		t.Fatalf("dave's desktops on the web: %d %s; want %s", code, body, member)
	}

	out = p.mustCLI(t, "connect", member)
	if !strings.Contains(out, "open "+p.m.URL()+"/desktops/"+member) {
		t.Fatalf("connect printed no one-click URL:\n%s", out)
	}
	if f := row(out, "best"); len(f) < 4 || f[2] != "direct" {
		t.Fatalf("connect's best console %q; want a direct path in\n%s", f, out)
	}
	var cj map[string]any
	if err := json.Unmarshal([]byte(p.mustCLI(t, "connect", member, "-json")), &cj); err != nil || cj["url"] == nil || cj["protocol"] == nil {
		t.Fatalf("connect -json = %v, %v", cj, err)
	}

	// Ambiguity: a pool named like a member of another pool.
	p.mustCLI(t, "pool", "create", "walk-1", "--size", "1")
	_, err := p.cli(t, "assign", "local/walk-1", "dave")
	if err == nil || cli.ExitCode(err) != cli.ExitConflict || !strings.Contains(err.Error(), "names both a pool and a desktop") {
		t.Fatalf("assign of an ambiguous name: %v (exit %d); want a refusal", err, cli.ExitCode(err))
	}
	p.mustCLI(t, "pool", "delete", "local/walk-1")

	// unassign: dave's was assigned; carol claimed hers, which needs --force.
	if out := p.mustCLI(t, "unassign", member); !strings.Contains(out, "unassigned "+member+" from dave") {
		t.Fatalf("unassign printed %q", out)
	}
	_, err = p.cli(t, "unassign", "local/"+web.Name)
	if err == nil || cli.ExitCode(err) != cli.ExitConflict || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("unassign of carol's own claim: %v; want --force asked for", err)
	}
	p.mustCLI(t, "unassign", "local/"+web.Name, "--force")
	code, body = p.api(t, "carol", "GET", "/api/vdi/desktops", "")
	if code != http.StatusOK || strings.Contains(body, web.Name) {
		t.Fatalf("carol's desktops after unassign --force: %d %s", code, body)
	}
	if _, err := p.cli(t, "assign", "local/nosuch", "dave"); cli.ExitCode(err) != cli.ExitNotFound {
		t.Fatalf("assign to a missing pool: %v (exit %d); want exit %d", err, cli.ExitCode(err), cli.ExitNotFound)
	}
	if _, err := p.cli(t, "pool", "list", "walk"); cli.ExitCode(err) != cli.ExitUsage {
		t.Fatalf("pool list walk: %v; want a usage error", err)
	}
	if out := p.mustCLI(t, "pool", "delete", "local/walk"); !strings.Contains(out, "deleted pool local/walk") {
		t.Fatalf("pool delete printed %q", out)
	}
}
