package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// monitoring is deploy/overlays/monitoring, which the Helm chart reads too.
var monitoring = filepath.Join("..", "deploy", "overlays", "monitoring")

// scrapeMetrics reads p's /metrics as Prometheus would.
func scrapeMetrics(t *testing.T, p *Portal) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return families
}

// gauge returns the value of family name's series with exactly labels,
// and whether there is one.
func gauge(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// prometheusRuleSpec returns prometheusrule.yaml's spec (its rule
// groups, as a Prometheus rule file has them) as JSON.
func prometheusRuleSpec(tb testing.TB) json.RawMessage {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoring, "prometheusrule.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		tb.Fatalf("prometheusrule.yaml: %v", err)
	}
	return rule.Spec
}

// monitoringExprs returns the PromQL of every alert in
// prometheusrule.yaml and of every dashboard panel, by where it stands.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	var spec struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := json.Unmarshal(prometheusRuleSpec(t), &spec); err != nil {
		t.Fatalf("prometheusrule.yaml's spec: %v", err)
	}
	out := map[string]string{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	raw, err := os.ReadFile(filepath.Join(monitoring, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	// Grafana's variables, as Grafana fills them in.
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*")
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = vars.Replace(tg.Expr)
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d expressions in the alerts and the dashboard; want them all", len(out))
	}
	return out
}

// targetLabels are the labels Prometheus (with the Prometheus Operator's
// monitors) gives every series it scrapes from a pod; a scraped label of
// the same name would be renamed exported_<name>.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// histogramSeries is a histogram's series suffix in PromQL.
var histogramSeries = regexp.MustCompile(`_(bucket|count|sum)$`)

// checkMonitoring: every alert's and dashboard panel's expression parses
// as PromQL, and every metric and label it names is on the portal's real
// /metrics (families scraped after real claims), so no alert watches a
// series that never exists. The parser is MetricsQL's, a PromQL superset
// (prometheus/prometheus's own cannot join this module: its test imports
// pull an ambiguous genproto into go mod tidy).
func checkMonitoring(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if targetLabels[l.GetName()] {
					t.Errorf("%s carries label %s, which Prometheus sets for the target (and renames this one)", name, l.GetName())
				}
			}
		}
	}
	for where, expr := range monitoringExprs(t) {
		ast, err := metricsql.Parse(expr)
		if err != nil {
			t.Errorf("%s: %q is not PromQL: %v", where, expr, err)
			continue
		}
		metricsql.VisitAll(ast, func(e metricsql.Expr) {
			me, ok := e.(*metricsql.MetricExpr)
			if !ok || me.IsEmpty() {
				return
			}
			for _, filters := range me.LabelFilterss {
				checkSelector(t, where, families, filters)
			}
		})
	}
}

// checkSelector checks one series selector: its metric (the first filter,
// __name__) is a family, and each label it filters by is on it.
func checkSelector(t *testing.T, where string, families map[string]*dto.MetricFamily, filters []metricsql.LabelFilter) {
	t.Helper()
	if len(filters) == 0 || filters[0].Label != "__name__" || filters[0].IsRegexp {
		t.Errorf("%s: a selector %v without a plain metric name", where, filters)
		return
	}
	name := filters[0].Value
	f, extra := families[name], ""
	if base := histogramSeries.ReplaceAllString(name, ""); f == nil && families[base].GetType() == dto.MetricType_HISTOGRAM {
		f = families[base]
		if strings.HasSuffix(name, "_bucket") {
			extra = "le"
		}
	}
	if f == nil {
		t.Errorf("%s names %s, which the portal's /metrics does not have", where, name)
		return
	}
	have := map[string]bool{extra: extra != ""}
	for l := range targetLabels {
		have[l] = true
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			have[l.GetName()] = true
		}
	}
	for _, lf := range filters[1:] {
		if !have[lf.Label] {
			t.Errorf("%s selects %s by label %s, which it does not carry", where, name, lf.Label)
		}
	}
}
