package deploytest_test

import (
	"bytes"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/release"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// checkHelmInstallFromOCI does what the operating guide tells an operator:
// the release's chart (make release) pushed to an OCI registry, then
// `helm install corral-vdi oci://…/corral-vdi-portal --version X.Y.Z` with
// Helm's own install action against the real kube-apiserver, which
// creates the portal's objects pulling the release's image by digest, and
// (secrets.create, by default) the Secret of the portal's keys, which each
// upgrade keeps as it was; then `helm uninstall` takes every one of them away but
// that Secret.
func checkHelmInstallFromOCI(t *testing.T, c *testcluster.Cluster) {
	const ns, name, version = "corral-vdi-oci", "corral-vdi", "v0.3.0"
	image, digest := "registry.example.com/vdi/portal", "sha256:"+strings.Repeat("cd", 32)
	encoder, encoderDigest := release.DefaultEncoderImage, "sha256:"+strings.Repeat("c0", 32)
	admin := c.AdminClient(t)
	ctx := context.Background()
	restrictedNamespace(t, admin, ns)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, ""); err != nil {
		t.Fatal(err)
	}
	// Its own pool namespace: TestDeploy made corral-vdi-desktops without Helm.
	o := deploytest.OCIInstall{Deploy: filepath.Join("..", "..", "deploy"), Version: version,
		Image: image, Digest: digest, EncoderDigest: encoderDigest, Kubeconfig: kubeconfig, Namespace: ns, Name: name, Dir: dir,
		Values: map[string]any{"poolNamespaces": []any{map[string]any{"name": ns + "-desktops", "create": true}},
			"auth": map[string]any{"admins": "ops"}}}
	in, err := deploytest.InstallFromOCI(o)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corral-vdi-secrets"}}
	keys := func(when string) map[string][]byte {
		t.Helper()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			t.Fatalf("%s, the Secret of the portal's keys: %v", when, err)
		}
		return secret.Data
	}
	made := keys("after helm install with the chart's defaults")
	for _, k := range []string{"session-keys", "token-keys", "peer-secret", "metrics-token"} {
		if len(made[k]) == 0 {
			t.Errorf("the Secret helm install made has no %s: %v", k, slices.Collect(maps.Keys(made)))
		}
	}
	if len(in.Hooks) != 2 {
		t.Errorf("the release's hooks: %d; want helm test's readyz and signin", len(in.Hooks))
	}

	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corral-vdi-portal"}, &d); err != nil {
		t.Fatalf("after helm install, the portal's Deployment: %v", err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image+"@"+digest {
		t.Errorf("the installed Deployment pulls %s; want %s@%s", got, image, digest)
	}
	if got := sidecarImage(d); got != encoder+"@"+encoderDigest {
		t.Errorf("the installed Deployment's encoder sidecar pulls %q; want the release's %s@%s, on by default", got, encoder, encoderDigest)
	}
	if got := d.Labels["app.kubernetes.io/version"]; got != "" && got != version {
		t.Errorf("the installed Deployment's version label %q; want %s", got, version)
	}

	// The next release's chart, as docs/operating.md upgrades: with the
	// values file again the new digest rolls out and the values hold;
	// --reuse-values would keep the old chart's values, its digest too.
	next := o
	next.Version, next.Digest, next.EncoderDigest, next.Dir = "v0.4.0", "sha256:"+strings.Repeat("ef", 32), "sha256:"+strings.Repeat("e0", 32), t.TempDir()
	for _, reuse := range []bool{true, false} {
		if err := in.UpgradeFromOCI(next, reuse); err != nil {
			t.Fatal(err)
		}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(&d), &d); err != nil {
			t.Fatal(err)
		}
		want, wantEncoder := image+"@"+next.Digest, encoder+"@"+next.EncoderDigest
		if reuse {
			want, wantEncoder = image+"@"+digest, encoder+"@"+encoderDigest
		}
		if got, enc := d.Spec.Template.Spec.Containers[0].Image, sidecarImage(d); got != want || enc != wantEncoder {
			t.Errorf("helm upgrade --version 0.4.0 (--reuse-values %v): the Deployment pulls %s and %s; want %s and %s", reuse, got, enc, want, wantEncoder)
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "CORRAL_VDI_ADMINS", Value: "ops"}) {
			t.Errorf("helm upgrade (--reuse-values %v) lost the admins value: %v", reuse, d.Spec.Template.Spec.Containers[0].Env)
		}
		if now := keys("after helm upgrade"); !maps.EqualFunc(now, made, bytes.Equal) {
			t.Errorf("helm upgrade (--reuse-values %v) changed the Secret's keys: it would sign everyone out", reuse)
		}
	}

	if err := in.Uninstall(); err != nil {
		t.Fatal(err)
	}
	keys("after helm uninstall (the chart keeps it)")
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

// sidecarImage is the image of d's encoder sidecar, "" where it has none.
func sidecarImage(d appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == "encoder" {
			return c.Image
		}
	}
	return ""
}

// checkHelmLeavesOperatorsSecret: an operator who made the Secret of the
// portal's keys before installing the chart (docs/operating.md, step 3,
// or an install from before the chart made it; here one without
// metrics-token) installs, upgrades and uninstalls with the chart's
// defaults: Helm does not refuse to take over a Secret it did not make,
// and the Secret is the operator's throughout, its keys as they were.
func checkHelmLeavesOperatorsSecret(t *testing.T, c *testcluster.Cluster) {
	const ns, name, version = "corral-vdi-own", "corral-vdi", "v0.3.0"
	admin := c.AdminClient(t)
	ctx := context.Background()
	restrictedNamespace(t, admin, ns)
	own := map[string][]byte{"session-keys": []byte("the operator's session key"), "token-keys": []byte("the operator's token key"),
		"peer-secret": []byte("the operator's peer secret")}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corral-vdi-secrets"}, Data: own}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	same := func(when string) {
		t.Helper()
		var now corev1.Secret
		if err := admin.Get(ctx, client.ObjectKeyFromObject(secret), &now); err != nil {
			t.Fatalf("%s, the operator's Secret: %v", when, err)
		}
		if !maps.EqualFunc(now.Data, own, bytes.Equal) {
			t.Errorf("%s the operator's Secret has keys %v; want theirs, %v, left alone", when, slices.Sorted(maps.Keys(now.Data)), slices.Sorted(maps.Keys(own)))
		}
		if by := now.Annotations["meta.helm.sh/release-name"]; by != "" {
			t.Errorf("%s the operator's Secret is release %s's", when, by)
		}
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, ""); err != nil {
		t.Fatal(err)
	}
	o := deploytest.OCIInstall{Deploy: filepath.Join("..", "..", "deploy"), Version: version,
		Image: "registry.example.com/vdi/portal", Digest: "sha256:" + strings.Repeat("cd", 32), Kubeconfig: kubeconfig,
		Namespace: ns, Name: name, Dir: dir,
		Values: map[string]any{"poolNamespaces": []any{map[string]any{"name": ns + "-desktops", "create": true}}}}
	in, err := deploytest.InstallFromOCI(o)
	if err != nil {
		t.Fatal(err)
	}
	same("after helm install")
	next := o
	next.Version, next.Dir = "v0.4.0", t.TempDir()
	if err := in.UpgradeFromOCI(next, false); err != nil {
		t.Fatal(err)
	}
	same("after helm upgrade")
	if err := in.Uninstall(); err != nil {
		t.Fatal(err)
	}
	same("after helm uninstall")
}

// restrictedNamespace makes namespace ns, Pod Security restricted
// enforced as deploy/ makes the portal's, for the test's length.
func restrictedNamespace(t *testing.T, admin client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
}
