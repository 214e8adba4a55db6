package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Prometheus is a real Prometheus server (Debian's) scraping one portal
// every second and evaluating the shipped alert rules every second.
type Prometheus struct {
	URL string
	log string
}

// prometheusConf scrapes the portal's /metrics (%s: host:port) as the
// ServiceMonitor does and loads the rules from rules.yaml.
const prometheusConf = `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: corral-vdi-portal
    static_configs:
      - targets: [%q]
`

// MustStartPrometheus starts Prometheus scraping portal (a base URL) with
// the PrometheusRule's groups as its rule file, as the Prometheus
// Operator would load them.
func MustStartPrometheus(tb testing.TB, portal string) *Prometheus {
	tb.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		tb.Fatal("prometheus is not installed (Debian package prometheus; make test-deps installs it)")
	}
	target, err := url.Parse(portal)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	rules, err := yaml.JSONToYAML(prometheusRuleSpec(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), fmt.Appendf(nil, prometheusConf, target.Host), 0o600); err != nil {
		tb.Fatal(err)
	}
	addr := freeAddr(tb)
	p := &Prometheus{URL: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if tb.Failed() {
			out, _ := os.ReadFile(p.log)
			tb.Logf("prometheus log:\n%s", out)
		}
	})
	if !eventually(60*time.Second, func() bool { return p.get(tb, "/-/ready", nil) == nil }) {
		tb.Fatal("prometheus not ready in 60 s")
	}
	return p
}

// get reads path from Prometheus's HTTP API into out (the "data" of its
// answer when out is not nil).
func (p *Prometheus) get(tb testing.TB, path string, out any) error {
	tb.Helper()
	res, err := http.Get(p.URL + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, res.Status)
		}
		return nil
	}
	var answer struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if answer.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, res.Status, answer.Error)
	}
	return json.Unmarshal(answer.Data, out)
}

// Query evaluates expr now and returns how many series or samples it
// gave, or Prometheus's error.
func (p *Prometheus) Query(tb testing.TB, expr string) (int, error) {
	tb.Helper()
	var data struct{ Result []json.RawMessage }
	if err := p.get(tb, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return 0, err
	}
	return len(data.Result), nil
}

// promRule is one rule's state in Prometheus's /api/v1/rules.
type promRule struct {
	Name, Health, LastError, State string
	LastEvaluation                 time.Time
	Alerts                         []struct {
		Labels map[string]string
		State  string
	}
}

// Rules returns every loaded rule's state.
func (p *Prometheus) Rules(tb testing.TB) []promRule {
	tb.Helper()
	var data struct{ Groups []struct{ Rules []promRule } }
	if err := p.get(tb, "/api/v1/rules", &data); err != nil {
		tb.Fatal(err)
	}
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// evalMonitoring evaluates the shipped alerts and dashboard panels in a
// real Prometheus that scrapes portal p: each rule evaluates without an
// error (a vector matching Prometheus refuses, say, which parsing alone
// does not see) and each panel's query answers; the alerts named in
// pending are pending or firing for a series whose labels include the
// given ones, and every other alert is inactive.
func evalMonitoring(t *testing.T, p *Portal, pending map[string]map[string]string) {
	t.Helper()
	prom := MustStartPrometheus(t, p.URL)
	// Three scrapes, so that rate() and increase() have samples to
	// compare, and an evaluation of every rule after them.
	if !eventually(90*time.Second, func() bool {
		n, err := prom.Query(t, `count_over_time(up{job="corral-vdi-portal"}[5m]) >= 3`)
		return err == nil && n == 1
	}) {
		t.Fatal("prometheus did not scrape the portal three times in 90 s")
	}
	scraped := time.Now()
	var rules []promRule
	if !eventually(60*time.Second, func() bool {
		rules = prom.Rules(t)
		for _, r := range rules {
			if r.LastEvaluation.Before(scraped) {
				return false
			}
		}
		return len(rules) > 0
	}) {
		t.Fatalf("prometheus did not evaluate every rule after the scrapes in 60 s: %+v", rules)
	}
	for _, r := range rules {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("alert %s: health %q, %s; want it evaluated without an error", r.Name, r.Health, r.LastError)
		}
		want, ok := pending[r.Name]
		found := false
		for _, a := range r.Alerts {
			match := true
			for k, v := range want {
				match = match && a.Labels[k] == v
			}
			found = found || (match && (a.State == "pending" || a.State == "firing"))
		}
		switch {
		case ok && !found:
			t.Errorf("alert %s: %s with alerts %+v; want one pending or firing with labels %v", r.Name, r.State, r.Alerts, want)
		case !ok && r.State != "inactive":
			t.Errorf("alert %s: %s (%+v); want inactive", r.Name, r.State, r.Alerts)
		}
	}
	for where, expr := range monitoringExprs(t) {
		if strings.HasPrefix(where, "alert ") {
			continue
		}
		if _, err := prom.Query(t, expr); err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
		}
	}
}
