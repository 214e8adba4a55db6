package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
)

// previousRelease is N−1 of the version-skew promise (docs/operating.md,
// "Upgrades and key rotation"): the commit of the release before this
// one, built from this repository's history by TestUpgrade_Skew. Each
// release moves it to the one it replaces.
const previousRelease = "621ce6890df9e764a9ea76b01df3f00e48523fc4"

// previousBuild is N−1 built: its binary and its deploy/ folder.
type previousBuild struct{ bin, deploy string }

// buildPrevious builds previousRelease from this clone's history: its
// tree from git, its browser clients from the same npm packages (this
// tree's node_modules when the lockfiles agree, else npm ci) and its
// binary with go build. The build is kept in the test tools' cache,
// keyed by the commit and the Go release, so a run after the first
// starts at once: a commit's tree never changes.
func buildPrevious(t *testing.T) previousBuild {
	t.Helper()
	cached := filepath.Join(testcluster.CacheRoot(), fmt.Sprintf("previous-%.12s-%s", previousRelease, runtime.Version()))
	prev := previousBuild{bin: filepath.Join(cached, "corral-vdi-portal"), deploy: filepath.Join(cached, "deploy")}
	if _, err := os.Stat(prev.bin); err == nil {
		return prev
	}
	must(t, os.MkdirAll(filepath.Dir(cached), 0o755))
	dir, err := os.MkdirTemp(filepath.Dir(cached), "previous-build")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	src := filepath.Join(dir, "src")
	must(t, os.Mkdir(src, 0o755))
	archive := exec.Command("git", "-C", "..", "archive", "--format=tar", previousRelease)
	untar := exec.Command("tar", "-x", "-C", src)
	var aerr, terr bytes.Buffer
	archive.Stderr, untar.Stderr = &aerr, &terr
	pipe, err := archive.StdoutPipe()
	must(t, err)
	untar.Stdin = pipe
	must(t, archive.Start())
	if err := untar.Run(); err != nil {
		t.Fatalf("untar N−1: %v %s", err, terr.String())
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("N−1 (commit %s) from this clone's history: %v %s (a shallow clone lacks it: git fetch --unshallow)", previousRelease, err, aerr.String())
	}
	ours, err := os.ReadFile(filepath.Join("..", "package-lock.json"))
	must(t, err)
	theirs, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	must(t, err)
	if bytes.Equal(ours, theirs) {
		nm, err := filepath.Abs(filepath.Join("..", "node_modules"))
		must(t, err)
		must(t, os.Symlink(nm, filepath.Join(src, "node_modules")))
		// The lockfile older than node_modules: the assets script copies
		// from it and never runs npm ci into this tree's node_modules.
		old := time.Unix(0, 0)
		must(t, os.Chtimes(filepath.Join(src, "package-lock.json"), old, old))
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("N−1: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("bash", "scripts/assets.sh")
	out := filepath.Join(dir, "out")
	must(t, os.Mkdir(out, 0o755))
	run("go", "build", "-o", filepath.Join(out, "corral-vdi-portal"), "./cmd/corral-vdi-portal")
	must(t, os.Rename(filepath.Join(src, "deploy"), filepath.Join(out, "deploy")))
	// One rename makes the build appear whole; a process that built it
	// meanwhile has put the same build there.
	if err := os.Rename(out, cached); err != nil {
		if _, serr := os.Stat(prev.bin); serr != nil {
			t.Fatalf("keep N−1's build: %v", err)
		}
	}
	return prev
}

// TestUpgrade_Skew is the rolling update docs/operating.md promises: two
// replicas of the previous release (N−1, each with the environment its
// own deploy/ sets) and one of this build (N) on one cluster, one set of
// Leases, one PostgreSQL database and one peer secret. N−1 makes the
// pool; alice claims on N and bob on N−1; alice, holding her screen on N,
// invites erin, who watches on N−1 over a screen link, and both see one
// screen through KubeVirt's one-client vnc subresource, nobody kicked;
// bob's release on N frees his member for everyone. Then the N−1
// replicas roll to N: alice's claim and console hold, erin reopens on a
// new replica and sees the same screen, and the sessions N−1 recorded
// are in the history N reads.
func TestUpgrade_Skew(t *testing.T) {
	built := time.Now()
	prev := buildPrevious(t)
	t.Logf("N−1 (%.7s) ready in %v (built on first use, then from the cache)", previousRelease, time.Since(built).Round(time.Second))
	c := testcluster.MustStart(t)
	standIn := c.StartKubeVirtStandIn(t)
	admin := c.AdminClient(t)
	ns := c.Namespace(t)
	applyNamespacedRBAC(t, c, ns)
	kubeconfig := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	secrets := deploySecrets(t)
	shared := []string{"CORRAL_VDI_POOL_NAMESPACES=" + ns, "CORRAL_VDI_DATABASE_URL=" + testpg.Shared(t).NewDatabase(t)}
	oldEnv := append(haEnvFrom(t, prev.deploy, secrets, kubeconfig), shared...)
	newEnv := append(haEnv(t, secrets, kubeconfig), shared...)
	var reps []*haReplica
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range reps {
				t.Logf("replica %s's log:\n%s", r.name, r.p.Log())
			}
		}
	})
	start := func(bin, name string, env []string) *haReplica {
		t.Helper()
		r := startReplicaBin(t, bin, name, t.TempDir(), "127.0.0.1:0", env)
		reps = append(reps, r)
		waitFor(t, 30*time.Second, name+" ready", func() bool { return get(t, r.p.URL+"/readyz", nil) == 200 })
		return r
	}
	a, b := start(prev.bin, "a (N−1)", oldEnv), start(prev.bin, "b (N−1)", oldEnv)
	n := start(binary, "c (N)", newEnv)

	// N−1 makes the pool; both members' screens are reached through the
	// API server's vnc subresource, one client at a time.
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"up","kind":"vm","mode":"persistent","source":"golden","size":2}`, ns)
	var perr apiError
	if code := a.p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create the pool on N−1: %d %+v", code, perr)
	}
	var members []string
	waitFor(t, 90*time.Second, "the pool's two member VMs", func() bool {
		var vms kubevirtv1.VirtualMachineList
		admin.List(context.Background(), &vms, client.InNamespace(ns), client.MatchingLabels{"corral.dev/vdi-pool": "up"})
		members = members[:0]
		for _, vm := range vms.Items {
			members = append(members, vm.Name)
		}
		return len(members) == 2
	})
	for _, m := range members {
		standIn.WithoutIPs(ns, m)
	}
	claim := func(r *haReplica, user string) desktop {
		t.Helper()
		var d desktop
		waitFor(t, 90*time.Second, user+"'s claim on "+r.name, func() bool {
			return r.p.API(t, user, "POST", "/api/vdi/pools/"+ns+"/up/claim", &d) == 200 && d.Power == "running"
		})
		return d
	}
	alice, bob := claim(n, "alice"), claim(a, "bob")
	if alice.Name == bob.Name {
		t.Fatalf("alice (on N) and bob (on N−1) both hold %s", alice.Name)
	}

	// One screen across versions: alice on N owns it, erin (invited on
	// N−1) watches on N−1 over a screen link.
	desktopPath := "/api/vdi/desktops/" + ns + "/" + alice.Name
	if code := a.p.APIBody(t, "alice", "POST", desktopPath+"/shares", `{"user":"erin","control":false}`, nil); code != 201 && code != 200 {
		t.Fatalf("alice invites erin on N−1: %d", code)
	}
	hs := &haScreen{ns: ns, member: alice.Name}
	viewers := map[string]*rfbViewer{"alice@N": hs.open(t, n, "alice")}
	viewers["erin@N−1"] = hs.open(t, b, "erin")
	sameScreen(t, "alice on N, erin on N−1", viewers)
	upstreams := func(want int) {
		t.Helper()
		got := standIn.Consoles(ns, alice.Name, "vnc")
		if got.Opened != want || got.Kicked != 0 || got.Refused != 0 {
			t.Fatalf("the VMI's VNC console: %+v; want %d opened, none kicked or refused", got, want)
		}
	}
	upstreams(1)

	// bob's release on N frees his member on every replica.
	if code := n.p.API(t, "bob", "POST", "/api/vdi/desktops/"+ns+"/"+bob.Name+"/release", nil); code != 200 {
		t.Fatalf("bob's release on N: %d", code)
	}
	for _, r := range []*haReplica{a, b, n} {
		waitFor(t, 60*time.Second, "one free member on "+r.name, func() bool {
			var pools []pool
			r.p.API(t, "dave", "GET", "/api/vdi/pools", &pools)
			return len(pools) == 1 && pools[0].Free == 1
		})
	}

	// The roll: each N−1 replica drains and stops, an N one takes its
	// place. erin's console on b closes and she reopens on the new one.
	a.p.Stop(t)
	a2 := start(binary, "a2 (N)", newEnv)
	b.p.Stop(t)
	closedWith(t, viewers["erin@N−1"], "erin's console on b after b stopped")
	delete(viewers, "erin@N−1")
	b2 := start(binary, "b2 (N)", newEnv)
	viewers["erin@N"] = hs.open(t, b2, "erin")
	sameScreen(t, "after the roll", viewers)
	upstreams(1)

	var mine []desktop
	if code := a2.p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); code != 200 || len(mine) != 1 || mine[0].Name != alice.Name {
		t.Errorf("alice's desktops on N after the roll: %d %+v; want %s, claimed before it", code, mine, alice.Name)
	}
	var erins []string
	for _, row := range csvRows(t, a2.p, "/admin/history/sessions.csv") {
		if len(row) > 4 && row[1] == "erin" && row[3] == alice.Name {
			erins = append(erins, row[0])
		}
	}
	if len(erins) < 2 {
		t.Errorf("erin's sessions in the history N reads: %v; want the one N−1 recorded and the one after the roll", erins)
	}
}
