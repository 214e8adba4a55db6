package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Chart is a rendered Helm chart: its objects as helm install would apply
// them, and its hooks (helm test's pods) apart.
type Chart struct {
	Objects []*unstructured.Unstructured
	Hooks   []*unstructured.Unstructured
}

// ReadValues reads a values file as helm install -f would.
func ReadValues(file string) (map[string]any, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return loader.LoadValues(f)
}

// RenderChart renders the chart in dir as `helm install --dry-run` would
// for a release named release in namespace, with vals over the chart's
// values: the values are checked against values.schema.json first, so a
// bad value fails here as it would at helm install.
func RenderChart(dir, release, namespace string, vals map[string]any) (*Chart, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("deploytest: load chart %s: %w", dir, err)
	}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, nil, false)
	if err != nil {
		return nil, fmt.Errorf("deploytest: values of %s: %w", dir, err)
	}
	files, err := engine.Engine{Strict: true}.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, fmt.Errorf("deploytest: render %s: %w", dir, err)
	}
	out := &Chart{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(files[name])), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("deploytest: %s: %w", name, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook {
				out.Hooks = append(out.Hooks, u)
			} else {
				out.Objects = append(out.Objects, u)
			}
		}
	}
	return out, nil
}

// LintChart runs helm lint's rules on the chart in dir with vals and
// returns its findings of warning severity or worse.
func LintChart(dir, namespace string, vals map[string]any) []support.Message {
	var out []support.Message
	for _, m := range lint.RunAll(dir, vals, namespace).Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m)
		}
	}
	return out
}
