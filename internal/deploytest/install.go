package deploytest

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	helmrelease "helm.sh/helm/v4/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/internal/release"
)

// OCIInstall is what an operator's `helm install NAME
// oci://REGISTRY/charts/corral-vdi-portal --version X.Y.Z -n NAMESPACE -f
// values.yaml` takes, with the release's chart as make release packs it.
type OCIInstall struct {
	Deploy        string         // the repository's deploy/ folder the chart is packed from
	Version       string         // the release, e.g. v0.3.0
	Image         string         // the image repository the chart pins
	Digest        string         // the image digest it pins (sha256:…)
	EncoderDigest string         // the encoder image digest it pins, turning the encoder on ("": none, off)
	Kubeconfig    string         // the operator's kubeconfig
	Namespace     string         // -n: the release namespace, made beforehand
	Name          string         // the release name
	Values        map[string]any // -f
	Dir           string         // scratch: the package, Helm's caches
}

// Installed is a release helm install made.
type Installed struct {
	// Ref is the chart's OCI reference the install pulled.
	Ref string
	// Hooks are the release's hooks (helm test's Pods) as Helm keeps them.
	Hooks []*unstructured.Unstructured
	cfg   *action.Configuration
	name  string
}

// InstallFromOCI packs the chart of o.Deploy as make release does, pushes
// it to an OCI registry of its own (go-containerregistry's, on loopback,
// gone once the install pulled it) and runs Helm's own install action
// from that reference against o.Kubeconfig's cluster, without --wait (the
// CLI's default): the API server admits and stores what the chart
// renders, hooks apart.
func InstallFromOCI(o OCIInstall) (*Installed, error) {
	var rel helmrelease.Releaser
	var at string
	cfg, err := fromOCI(o, func(cfg *action.Configuration, settings *cli.EnvSettings, ref string) error {
		at = ref
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.Version, install.PlainHTTP = o.Name, o.Namespace, strings.TrimPrefix(o.Version, "v"), true
		install.WaitStrategy = kube.HookOnlyStrategy // the CLI's default (no --wait)
		path, err := install.LocateChart(ref, settings)
		if err != nil {
			return fmt.Errorf("helm install %s: locate the chart: %w", ref, err)
		}
		ch, err := loader.Load(path)
		if err != nil {
			return err
		}
		if rel, err = install.Run(ch, o.Values); err != nil {
			return fmt.Errorf("helm install %s --version %s: %w", ref, install.Version, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	acc, err := helmrelease.NewAccessor(rel)
	if err != nil {
		return nil, err
	}
	in := &Installed{Ref: at, cfg: cfg, name: o.Name}
	for _, h := range acc.Hooks() {
		ha, err := helmrelease.NewHookAccessor(h)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(ha.Manifest()), &u.Object); err != nil {
			return nil, fmt.Errorf("deploytest: hook %s: %w", ha.Path(), err)
		}
		in.Hooks = append(in.Hooks, u)
	}
	return in, nil
}

// UpgradeFromOCI runs Helm's upgrade action on the release with o's
// chart (another release of it), as `helm upgrade NAME oci://… --version
// X.Y.Z -f values.yaml` would; reuseValues is --reuse-values.
func (in *Installed) UpgradeFromOCI(o OCIInstall, reuseValues bool) error {
	_, err := fromOCI(o, func(cfg *action.Configuration, settings *cli.EnvSettings, ref string) error {
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Version, up.PlainHTTP, up.ReuseValues = o.Namespace, strings.TrimPrefix(o.Version, "v"), true, reuseValues
		up.WaitStrategy = kube.HookOnlyStrategy
		path, err := up.LocateChart(ref, settings)
		if err != nil {
			return fmt.Errorf("helm upgrade %s: locate the chart: %w", ref, err)
		}
		ch, err := loader.Load(path)
		if err != nil {
			return err
		}
		if _, err := up.Run(in.name, ch, o.Values); err != nil {
			return fmt.Errorf("helm upgrade %s %s --version %s: %w", in.name, ref, up.Version, err)
		}
		return nil
	})
	return err
}

// fromOCI packs o's chart as make release does, pushes it to an OCI
// registry of its own (go-containerregistry's, on loopback, gone once run
// returns) and calls run with Helm's configuration for o.Kubeconfig and
// o.Namespace and the chart's reference.
func fromOCI(o OCIInstall, run func(cfg *action.Configuration, settings *cli.EnvSettings, ref string) error) (*action.Configuration, error) {
	tgz, err := release.Chart(release.Config{Version: o.Version, Created: time.Unix(1767225600, 0),
		Deploy: o.Deploy, Image: o.Image, Out: o.Dir}, o.Digest, o.EncoderDigest)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, err := release.PushChart(tgz, "oci://"+host+"/charts", true); err != nil {
		return nil, err
	}
	settings := cli.New()
	settings.KubeConfig = o.Kubeconfig
	settings.SetNamespace(o.Namespace)
	settings.RepositoryConfig = filepath.Join(o.Dir, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(o.Dir, "cache")
	settings.ContentCache = filepath.Join(o.Dir, "content")
	settings.RegistryConfig = filepath.Join(o.Dir, "registry.json")
	reg, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(settings.RegistryConfig))
	if err != nil {
		return nil, err
	}
	cfg := &action.Configuration{RegistryClient: reg}
	if err := cfg.Init(settings.RESTClientGetter(), o.Namespace, "secret"); err != nil {
		return nil, err
	}
	return cfg, run(cfg, settings, "oci://"+host+"/charts/corral-vdi-portal")
}

// Uninstall runs Helm's uninstall action on the release, as `helm
// uninstall NAME` would.
func (in *Installed) Uninstall() error {
	u := action.NewUninstall(in.cfg)
	u.WaitStrategy = kube.HookOnlyStrategy
	if _, err := u.Run(in.name); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", in.name, err)
	}
	return nil
}
