package deploytest_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/release"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// checkHelmInstallFromOCI does what the operating guide tells an operator:
// the release's chart (make release) pushed to an OCI registry, then
// `helm install corral-vdi oci://…/corral-vdi-portal --version X.Y.Z` with
// Helm's own install action against the real kube-apiserver, which
// creates the portal's objects pulling the release's image by digest; then
// `helm uninstall` takes every one of them away.
func checkHelmInstallFromOCI(t *testing.T, c *testcluster.Cluster) {
	const ns, name, version = "corral-vdi-oci", "corral-vdi", "v0.3.0"
	image, digest := "registry.example.com/vdi/portal", "sha256:"+strings.Repeat("cd", 32)
	dir := t.TempDir()
	tgz, err := release.Chart(release.Config{Version: version, Created: time.Unix(1767225600, 0),
		Deploy: filepath.Join("..", "..", "deploy"), Image: image, Out: dir}, digest)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, err := release.PushChart(tgz, "oci://"+host+"/charts", true); err != nil {
		t.Fatal(err)
	}

	admin := c.AdminClient(t)
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })

	settings := cli.New()
	settings.KubeConfig = filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(settings.KubeConfig, ""); err != nil {
		t.Fatal(err)
	}
	settings.SetNamespace(ns)
	settings.RepositoryConfig = filepath.Join(dir, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(dir, "cache")
	settings.ContentCache = filepath.Join(dir, "content")
	settings.RegistryConfig = filepath.Join(dir, "registry.json")
	reg, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(settings.RegistryConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &action.Configuration{RegistryClient: reg}
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret"); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Version, install.PlainHTTP = name, ns, strings.TrimPrefix(version, "v"), true
	install.WaitStrategy = kube.HookOnlyStrategy // the CLI's default (no --wait)
	path, err := install.LocateChart("oci://"+host+"/charts/corral-vdi-portal", settings)
	if err != nil {
		t.Fatalf("helm install oci://…: locate the chart: %v", err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// Its own pool namespace: TestDeploy made corral-vdi-desktops without Helm.
	vals := map[string]any{"poolNamespaces": []any{map[string]any{"name": ns + "-desktops", "create": true}}}
	if _, err := install.Run(ch, vals); err != nil {
		t.Fatalf("helm install oci://%s/charts/corral-vdi-portal --version %s: %v", host, install.Version, err)
	}

	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corral-vdi-portal"}, &d); err != nil {
		t.Fatalf("after helm install, the portal's Deployment: %v", err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image+"@"+digest {
		t.Errorf("the installed Deployment pulls %s; want %s@%s", got, image, digest)
	}
	if got := d.Labels["app.kubernetes.io/version"]; got != "" && got != version {
		t.Errorf("the installed Deployment's version label %q; want %s", got, version)
	}

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	if _, err := uninstall.Run(name); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-desktops"}}} {
		err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if ns, ok := obj.(*corev1.Namespace); ok && err == nil && ns.DeletionTimestamp != nil {
			continue // being deleted: no namespace controller here to finish it
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall the %T %s: %v; want it gone", obj, obj.GetName(), err)
		}
	}
}
