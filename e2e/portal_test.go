// Package e2e drives the real corral-vdi-portal binary with real desktops
// and a real Chromium (through Playwright), the way a user would.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
)

// binary is the portal built once for all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // a portal run as another user (nobody) execs it too
	binary = filepath.Join(dir, "corral-vdi-portal")
	build := exec.Command("go", "build", "-o", binary, "../cmd/corral-vdi-portal")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build portal:", err)
		os.Exit(1)
	}
	code := m.Run()
	testpg.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Portal is a running portal binary.
type Portal struct {
	URL     string
	DataDir string
	cmd     *exec.Cmd
	log     *os.File
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// MustStartPortal starts the binary on a free loopback port with its own
// data directory and stops it (and its desktops) when the test ends.
func MustStartPortal(tb testing.TB, env ...string) *Portal {
	tb.Helper()
	data, err := os.MkdirTemp("", "cvd") // short: desktops' Unix sockets live under it
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeData(data) }) // runs after the portal stops
	return mustStartPortalIn(tb, data, env...)
}

// nobody is the uid and gid a portal that is not root runs as in tests.
const nobody = 65534

// MustStartPortalAsNobody is MustStartPortal for a portal that is not
// root: it runs as nobody, with a data directory of its own.
func MustStartPortalAsNobody(tb testing.TB, env ...string) *Portal {
	tb.Helper()
	data, err := os.MkdirTemp("", "cvd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeData(data) })
	return startPortalAsNobodyIn(tb, data, env...)
}

// startPortalAsNobodyIn starts a portal as nobody on data, like
// MustStartPortalAsNobody (a restart passes the same data).
func startPortalAsNobodyIn(tb testing.TB, data string, env ...string) *Portal {
	tb.Helper()
	if err := os.Chown(data, nobody, nobody); err != nil {
		tb.Fatal(err)
	}
	defaults := []string{
		"HOME=" + data, "XDG_CACHE_HOME=" + filepath.Join(data, "cache"),
		"CORRAL_VDI_LISTEN=127.0.0.1:0",
		"CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true",
		"CORRAL_VDI_BACKEND=local",
	}
	prefix := []string{"setpriv", "--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--"}
	return startPortalIn(tb, data, prefix, append(defaults, env...)...)
}

func mustStartPortalIn(tb testing.TB, data string, env ...string) *Portal {
	tb.Helper()
	defaults := []string{
		"CORRAL_VDI_LISTEN=127.0.0.1:0",
		"CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true",
		"CORRAL_VDI_BACKEND=local", // even on a machine with a kubeconfig
	}
	return startPortalIn(tb, data, nil, append(defaults, env...)...)
}

// startPortalIn starts the portal binary behind prefix (e.g. `ip netns exec
// NS`) on data, like MustStartPortal.
func startPortalIn(tb testing.TB, data string, prefix []string, env ...string) *Portal {
	tb.Helper()
	return startPortalBin(tb, binary, data, prefix, env...)
}

// startPortalBin is startPortalIn with another build of the portal (bin).
func startPortalBin(tb testing.TB, bin, data string, prefix []string, env ...string) *Portal {
	tb.Helper()
	return startPortalArgs(tb, bin, data, prefix, []string{"serve"}, env...)
}

// startPortalArgs is startPortalBin with the binary's arguments (a
// container's args).
func startPortalArgs(tb testing.TB, bin, data string, prefix, binArgs []string, env ...string) *Portal {
	tb.Helper()
	logf, err := os.Create(filepath.Join(tb.TempDir(), "portal.log"))
	if err != nil {
		tb.Fatal(err)
	}
	args := append(append(append([]string{}, prefix...), bin), binArgs...)
	cmd := exec.Command(args[0], args[1:]...)
	// The portal runs with the product's default (h264=auto: H.264 where
	// it encodes); a test that needs tiles asks for them and says why.
	cmd.Env = append(os.Environ(), "CORRAL_VDI_DATA_DIR="+data)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Portal{DataDir: data, cmd: cmd, log: logf}
	tb.Cleanup(func() { p.Stop(tb) })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case p.URL = <-urls:
	case <-time.After(20 * time.Second):
		tb.Fatalf("portal did not start; log:\n%s", p.Log())
	}
	return p
}

// Stop sends SIGTERM and waits for the portal to exit.
func (p *Portal) Stop(tb testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	if tb.Failed() {
		tb.Logf("desktop logs:\n%s", p.desktopLogs())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("portal exited: %v; log:\n%s", err, p.Log())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		tb.Errorf("portal did not stop within 30s; log:\n%s", p.Log())
	}
	if tb.Failed() {
		tb.Logf("portal log:\n%s", p.Log())
	}
}

// desktopLogs returns the last lines of every running local desktop's
// process logs (Xvnc says there why it closed a client), read before the
// portal stops the desktops and removes them.
func (p *Portal) desktopLogs() string {
	files, _ := filepath.Glob(filepath.Join(p.DataDir, "local", "members", "*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		buf, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", strings.TrimPrefix(f, p.DataDir+"/"), strings.Join(lines[max(0, len(lines)-200):], "\n"))
	}
	return b.String()
}

// Log returns what the portal has logged so far.
func (p *Portal) Log() string {
	buf, _ := os.ReadFile(p.log.Name())
	return string(buf)
}

// API calls the JSON API as user (through the Tailscale identity header,
// trusted from loopback) and decodes the answer into out when it is not nil.
func (p *Portal) API(tb testing.TB, user, method, path string, out any) int {
	tb.Helper()
	return p.APIBody(tb, user, method, path, "", out)
}

// mustClaim claims a desktop of the local pool as user, as Get a desktop
// does, and fails the test unless the claim is answered 200.
func mustClaim(tb testing.TB, p *Portal, user, pool string) desktop {
	tb.Helper()
	var d desktop
	if code := p.API(tb, user, "POST", "/api/vdi/pools/local/"+pool+"/claim", &d); code != 200 {
		tb.Fatalf("%s claims a desktop of %s: %d", user, pool, code)
	}
	return d
}

// APIBody is API with a JSON request body.
func (p *Portal) APIBody(tb testing.TB, user, method, path, body string, out any) int {
	tb.Helper()
	code, err := p.call(user, method, path, body, out)
	if err != nil {
		tb.Fatal(err)
	}
	return code
}

// call is APIBody for any goroutine: it returns what fails instead of
// failing the test.
func (p *Portal) call(user, method, path, body string, out any) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, p.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Tailscale-User-Login", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %d %q: %w", method, path, res.StatusCode, answer, err)
		}
	}
	return res.StatusCode, nil
}

// apiError is the JSON shape of API errors.
type apiError struct {
	Error string `json:"error"`
	Hint  string `json:"hint"`
}

// desktop is the JSON shape of a desktop.
type desktop struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Pool      string   `json:"pool"`
	Power     string   `json:"power"`
	Reason    string   `json:"reason"`
	Holder    string   `json:"holder"`
	Protocols []string `json:"protocols"`
	// Resetting is set while the member is stopped or made fresh after
	// its claim ended: no holder, and not free yet.
	Resetting string    `json:"resetting"`
	ClaimedAt time.Time `json:"claimedAt"`
	// Reclaim is the next reclaim the claim faces, if a rule applies.
	Reclaim *struct {
		Rule string    `json:"rule"`
		At   time.Time `json:"at"`
	} `json:"reclaim"`
}

// free reports whether d is free: held by nobody, not being reset.
func (d desktop) free() bool { return d.Holder == "" && d.Resetting == "" }

// pool is the JSON shape of a pool.
type pool struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	Free int    `json:"free"`
}

// homeOf returns the home folder of a local member.
func (p *Portal) homeOf(member string) string {
	return filepath.Join(p.DataDir, "local", "members", member, "home")
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// goroutines reads the portal's go_goroutines from its /metrics.
func (p *Portal) goroutines(tb testing.TB) int {
	tb.Helper()
	res, err := http.Get(p.URL + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				tb.Fatalf("go_goroutines %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatalf("no go_goroutines in /metrics:\n%s", body)
	return 0
}
