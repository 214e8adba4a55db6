package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
)

// cliHelperEnv makes the test binary run the command line in its arguments
// instead of the tests, so that a test can run the CLI as another user.
const cliHelperEnv = "CORRAL_CLI_TEST_COMMAND"

func init() {
	if os.Getenv(cliHelperEnv) != "1" {
		return
	}
	if err := cli.Run(context.Background(), cli.Stdio(), os.Args[1], os.Args[2:]); err != nil {
		os.Stderr.WriteString("corral-vdi-portal: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// cliPortal is a portal on the local backend run by its Main in this test.
type cliPortal struct {
	m    *Main
	data string
	env  map[string]string
	log  *testlog.Buffer
}

// mustStartCLIPortal starts a portal configured the way `serve` reads its
// environment, with no demo pool, and stops it and its desktops at the end.
// extra are more environment variables, as name, value pairs.
func mustStartCLIPortal(tb testing.TB, extra ...string) *cliPortal {
	tb.Helper()
	data, err := os.MkdirTemp("", "cvc") // short: desktops' sockets live under it
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(data) })
	p := &cliPortal{data: data, log: &testlog.Buffer{}, env: map[string]string{
		"CORRAL_VDI_DATA_DIR":              data,
		"CORRAL_VDI_LISTEN":                "127.0.0.1:0",
		"CORRAL_VDI_BACKEND":               "local",
		"CORRAL_VDI_AUTH":                  "tailscale",
		"CORRAL_VDI_DEMO_POOL_SIZE":        "0",
		"CORRAL_VDI_STOP_DESKTOPS_ON_EXIT": "true",
	}}
	for i := 0; i+1 < len(extra); i += 2 {
		p.env[extra[i]] = extra[i+1]
	}
	cfg, err := ParseConfig(nil, p.getenv)
	if err != nil {
		tb.Fatal(err)
	}
	if want := filepath.Join(data, "admin.sock"); cfg.Server.AdminSocket != want {
		tb.Fatalf("AdminSocket = %q; want %q", cfg.Server.AdminSocket, want)
	}
	p.m = &Main{Config: cfg, Log: slog.New(slog.NewTextHandler(p.log, nil)), Out: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.m.Open(ctx); err != nil {
		p.m.Close()
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.m.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		if err := p.m.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		if _, err := os.Lstat(cfg.Server.AdminSocket); !errors.Is(err, os.ErrNotExist) {
			tb.Errorf("admin socket left behind after Close: %v", err)
		}
		if tb.Failed() {
			tb.Logf("portal log:\n%s", p.log.String())
		}
	})
	return p
}

func (p *cliPortal) getenv(name string) string { return p.env[name] }

// cli runs an admin subcommand against p and returns what it printed.
func (p *cliPortal) cli(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	return runCLITest(tb, p.getenv, args...)
}

// mustCLI is cli that fails the test on an error.
func (p *cliPortal) mustCLI(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := p.cli(tb, args...)
	if err != nil {
		tb.Fatalf("corral-vdi-portal %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runCLITest runs the admin subcommand in args with getenv and returns
// what it printed.
func runCLITest(tb testing.TB, getenv func(string) string, args ...string) (string, error) {
	tb.Helper()
	var out, usage bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cli.Run(ctx, cli.Env{Getenv: getenv, Out: &out, ErrOut: &usage}, args[0], args[1:])
	return out.String(), err
}

// api calls the portal's HTTP listener as user (Tailscale header; the test
// runs on loopback, a trusted proxy), returning the status and the body.
func (p *cliPortal) api(tb testing.TB, user, method, path, body string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(method, p.m.URL()+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Tailscale-User-Login", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(answer)
}

// row returns the fields of the table line whose first field is first.
func row(table, first string) []string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// TestCLI_AgainstRunningPortal drives the admin subcommands over the admin
// socket of a running portal while a user claims through the HTTP API.
func TestCLI_AgainstRunningPortal(t *testing.T) {
	p := mustStartCLIPortal(t)
	me := "cli:" + userName(os.Getuid())

	t.Run("SocketIsPrivate", func(t *testing.T) {
		fi, err := os.Stat(p.m.Config.Server.AdminSocket)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("admin socket mode %v; want a socket with 0600", fi.Mode())
		}
	})

	t.Run("CreateAndList", func(t *testing.T) {
		out := p.mustCLI(t, "pool", "create", "-name", "cli", "-mode", "persistent", "-size", "1", "-idle-timeout", "1h")
		if want := "created pool local/cli: 1 persistent ct desktops"; !strings.Contains(out, want) {
			t.Fatalf("pool create printed %q; want %q", out, want)
		}
		out = p.mustCLI(t, "pools")
		if got, want := strings.Join(row(out, "local"), " "), "local cli ct persistent session 1 1 0 0"; got != want {
			t.Fatalf("pools row %q; want %q in\n%s", got, want, out)
		}
		if !strings.HasPrefix(out, "NAMESPACE") {
			t.Fatalf("pools printed no header:\n%s", out)
		}
		noEnv := func(string) string { return "" }
		if got, err := runCLITest(t, noEnv, "pools", "-socket", p.m.Config.Server.AdminSocket); err != nil || got != out {
			t.Fatalf("pools -socket = %q, %v; want %q", got, err, out)
		}
		var pools []struct {
			Name   string         `json:"name"`
			Size   int            `json:"size"`
			Policy map[string]any `json:"policy"`
		}
		if err := json.Unmarshal([]byte(p.mustCLI(t, "pools", "-json")), &pools); err != nil {
			t.Fatal(err)
		}
		if len(pools) != 1 || pools[0].Name != "cli" || pools[0].Policy["idleTimeout"] == nil {
			t.Fatalf("pools -json = %+v; want pool cli with an idle timeout", pools)
		}
	})

	t.Run("ResizeErrorsCarryTheHint", func(t *testing.T) {
		if out := p.mustCLI(t, "pool", "resize", "local/cli", "2"); !strings.Contains(out, "pool local/cli has 2 desktops (2 free)") {
			t.Fatalf("pool resize printed %q", out)
		}
		_, err := p.cli(t, "pool", "create", "-name", "cli")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Hint == "" || !strings.Contains(err.Error(), ae.Hint) {
			t.Fatalf("creating a pool twice: %v; want a 409 with its hint", err)
		}
		if _, err := p.cli(t, "pool", "resize", "cli", "1"); err == nil || !strings.Contains(err.Error(), "NAMESPACE/POOL") {
			t.Fatalf("resize without a namespace: %v; want a usage error", err)
		}
	})

	var held string
	t.Run("UserClaimsOverHTTPAndCLIShowsHolder", func(t *testing.T) {
		code, body := p.api(t, "alice", "POST", "/api/vdi/pools/local/cli/claim", "")
		if code != http.StatusOK {
			t.Fatalf("claim: %d %s", code, body)
		}
		var d struct{ Name string }
		if err := json.Unmarshal([]byte(body), &d); err != nil || d.Name == "" {
			t.Fatalf("claim answer %s: %v", body, err)
		}
		held = "local/" + d.Name
		mustOpenConsole(t, p, "alice", d.Name)
		out := p.mustCLI(t, "desktops")
		f := row(out, held)
		if len(f) < 5 || f[3] != "alice" {
			t.Fatalf("desktops row of %s: %q; want holder alice in\n%s", held, f, out)
		}
		if strings.Count(strings.TrimSpace(out), "\n") != 1 {
			t.Fatalf("desktops lists more than the claimed desktop:\n%s", out)
		}
		if all := p.mustCLI(t, "desktops", "-all"); strings.Count(strings.TrimSpace(all), "\n") != 2 {
			t.Fatalf("desktops -all should list both members:\n%s", all)
		}
	})

	t.Run("ForceReleaseIsAuditedAsCLI", func(t *testing.T) {
		if held == "" {
			t.Skip("no claim")
		}
		if out := p.mustCLI(t, "release", held, "-reason", "maintenance"); !strings.Contains(out, "released "+held) {
			t.Fatalf("release printed %q", out)
		}
		code, body := p.api(t, "alice", "GET", "/api/vdi/desktops/"+held, "")
		if code != http.StatusOK && code != http.StatusForbidden {
			t.Fatalf("alice's desktop after release: %d %s", code, body)
		}
		if strings.Contains(body, `"holder":"alice"`) {
			t.Fatalf("alice still holds %s: %s", held, body)
		}
		var audit []struct{ Actor, Action, Namespace, Target, Detail string }
		if err := json.Unmarshal([]byte(p.mustCLI(t, "audit", "-json", "-since", "1h")), &audit); err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, a := range audit {
			if a.Actor == me {
				actions = append(actions, a.Action+" "+a.Namespace+"/"+a.Target)
			}
		}
		_, member, _ := strings.Cut(held, "/")
		if got, want := strings.Join(actions, ", "), "force-release "+held+", pool-resize local/cli, pool-create local/cli"; got != want {
			t.Fatalf("audit by %s: %s; want %s (member %s)", me, got, want, member)
		}
		if out := p.mustCLI(t, "audit", "-user", "alice"); row(out, "AT") == nil || !strings.Contains(out, "claim") {
			t.Fatalf("audit -user alice shows no claim:\n%s", out)
		}
		if _, err := p.cli(t, "release", held); err == nil || !strings.Contains(err.Error(), "not claimed") {
			t.Fatalf("releasing a free desktop: %v; want the portal's message", err)
		}
	})

	t.Run("AssignAndHistory", func(t *testing.T) {
		if out := p.mustCLI(t, "assign", "local/cli-2", "bob"); !strings.Contains(out, "assigned local/cli-2 to bob") {
			t.Fatalf("assign printed %q", out)
		}
		if f := row(p.mustCLI(t, "desktops"), "local/cli-2"); len(f) < 4 || f[3] != "bob" {
			t.Fatalf("desktops row of local/cli-2: %q; want holder bob", f)
		}
		if held == "" {
			t.Skip("no claim")
		}
		var out string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out = p.mustCLI(t, "history", "-user", "alice", "-since", "24h", "-pool", "local/cli")
			if f := row(out, time.Now().Format("2006-01-02")); len(f) >= 7 && f[4] == "alice" && f[5] == held && f[6] == "vnc" {
				break // OPENED and CLOSED take two fields each
			}
			if time.Now().After(deadline) {
				t.Fatalf("history shows no closed vnc session of alice on %s:\n%s", held, out)
			}
		}
		if out := p.mustCLI(t, "history", "-user", "bob"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("history -user bob lists alice's session:\n%s", out)
		}
		if _, err := p.cli(t, "history", "-since", "yesterday"); err == nil || !strings.Contains(err.Error(), "-since") {
			t.Fatalf("history -since yesterday: %v; want an error naming -since", err)
		}
	})

	t.Run("TCPCannotBeCLI", func(t *testing.T) {
		// Nobody, and a Tailscale header naming a CLI user, is not signed in.
		for _, user := range []string{"", me, "cli:root"} {
			code, body := p.api(t, user, "POST", "/api/vdi/pools", `{"name": "tcp", "size": 1}`)
			if code != http.StatusUnauthorized {
				t.Fatalf("pool create on TCP as %q: %d %s; want 401", user, code, body)
			}
			if code, body := p.api(t, user, "GET", "/api/vdi/history/audit", ""); code != http.StatusUnauthorized {
				t.Fatalf("audit on TCP as %q: %d %s; want 401", user, code, body)
			}
		}
		if code, body := p.api(t, "alice", "GET", "/api/vdi/history/audit", ""); code != http.StatusForbidden {
			t.Fatalf("audit on TCP as alice: %d %s; want 403", code, body)
		}
		if f := row(p.mustCLI(t, "pools"), "local"); len(f) < 2 || f[1] != "cli" {
			t.Fatalf("pools after TCP attempts: %q; want only cli", f)
		}
	})

	t.Run("OtherUserIsRefused", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to run the CLI as nobody")
		}
		bin := copyTestBinary(t)
		nobody := func(args ...string) (string, int) {
			cmd := exec.Command(bin, args...)
			cmd.Env = []string{cliHelperEnv + "=1", "CORRAL_VDI_DATA_DIR=" + p.data, "HOME=/nonexistent"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			return string(out), cmd.ProcessState.ExitCode()
		}
		// The data directory (0700) keeps nobody away from the socket.
		if out, code := nobody("pools"); code == 0 || !strings.Contains(out, "permission denied") {
			t.Fatalf("pools as nobody: exit %d, %q; want permission denied", code, out)
		}
		// With the file modes opened up, the peer credentials still refuse.
		for path, mode := range map[string]os.FileMode{p.data: 0o711, p.m.Config.Server.AdminSocket: 0o666} {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
		}
		defer os.Chmod(p.data, 0o700)
		defer os.Chmod(p.m.Config.Server.AdminSocket, 0o600)
		out, code := nobody("pool", "create", "-name", "nobody")
		if code == 0 || !strings.Contains(out, "may not use the portal's admin socket") || !strings.Contains(out, "Run the command as root") {
			t.Fatalf("pool create as nobody: exit %d, %q; want refused", code, out)
		}
		if f := row(p.mustCLI(t, "pools"), "local"); len(f) < 2 || f[1] != "cli" {
			t.Fatalf("pools after nobody's attempt: %q; want only cli", f)
		}
	})

	t.Run("DeleteAfterRelease", func(t *testing.T) {
		if _, err := p.cli(t, "pool", "delete", "local/cli"); err == nil {
			t.Fatal("deleting a pool bob holds a desktop of: no error")
		}
		p.mustCLI(t, "release", "local/cli-2")
		if out := p.mustCLI(t, "pool", "delete", "local/cli"); !strings.Contains(out, "deleted pool local/cli") {
			t.Fatalf("pool delete printed %q", out)
		}
		if out := p.mustCLI(t, "pools"); row(out, "local") != nil {
			t.Fatalf("pools after delete:\n%s", out)
		}
	})
}

// mustOpenConsole opens member's VNC console as user over the TCP listener
// until the desktop answers with the RFB banner, then closes it: a console
// session for the history.
func mustOpenConsole(tb testing.TB, p *cliPortal, user, member string) {
	tb.Helper()
	h := http.Header{"Tailscale-User-Login": {user}, "Origin": {p.m.URL()}}
	url := "ws" + strings.TrimPrefix(p.m.URL(), "http") + "/ws/vnc/local/" + member
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		ws, _, err := websocket.DefaultDialer.Dial(url, h)
		if err == nil {
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, msg, rerr := ws.ReadMessage()
			ws.Close()
			if rerr == nil && string(msg) == "RFB 003.008\n" {
				return
			}
			err = fmt.Errorf("first message %q, %v", msg, rerr)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("console of %s: %v", member, err)
		}
	}
}

// copyTestBinary copies this test binary where any user may run it.
func copyTestBinary(tb testing.TB) string {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cvc-bin")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "corral-vdi-portal")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
	return bin
}
