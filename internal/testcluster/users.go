package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// User returns a config that authenticates as name in groups with a client
// certificate; it may do only what RBAC grants it.
func (c *Cluster) User(tb testing.TB, name string, groups ...string) *rest.Config {
	tb.Helper()
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		tb.Fatalf("testcluster: add user %s: %v", name, err)
	}
	cfg := rest.CopyConfig(u.Config())
	unlimit(cfg)
	return cfg
}

// AwaitAccess waits until RBAC lets user (in groups) do each of attrs.
// The apiserver's authorizer reads Roles and bindings from its informers,
// so a binding just created can take a moment to count: a test that binds
// a role and then acts as its subject waits here first. A ServiceAccount's
// user is "system:serviceaccount:NAMESPACE:NAME".
func (c *Cluster) AwaitAccess(tb testing.TB, user string, groups []string, attrs ...authorizationv1.ResourceAttributes) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range attrs {
		for {
			r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &a}}, metav1.CreateOptions{})
			if err == nil && r.Status.Allowed {
				break
			}
			if ctx.Err() != nil {
				tb.Fatalf("testcluster: RBAC does not let %s %s %s.%s in %q after 30 s (%v)", user, a.Verb, a.Resource, a.Group, a.Namespace, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// ServiceAccount returns a config that authenticates as the ServiceAccount
// namespace/name with a bound token from the TokenRequest API, as a pod
// running as it would; the ServiceAccount is created if missing.
func (c *Cluster) ServiceAccount(tb testing.TB, namespace, name string) *rest.Config {
	tb.Helper()
	cfg, err := c.ServiceAccountConfig(context.Background(), namespace, name)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// ServiceAccountConfig is ServiceAccount for callers without a testing.TB.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("testcluster: create ServiceAccount %s/%s: %w", namespace, name, err)
	}
	hour := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testcluster: token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tok.Status.Token
	unlimit(cfg)
	return cfg, nil
}

// Impersonate returns the admin config acting as name in groups: quick for
// checking what RBAC lets someone do, without a certificate or a token.
func (c *Cluster) Impersonate(name string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: groups}
	return cfg
}

// Clientset returns a typed client for cfg, failing tb on error.
func Clientset(tb testing.TB, cfg *rest.Config) kubernetes.Interface {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// Kubeconfig returns cfg as a kubeconfig file's bytes, for a child process
// or a human with kubectl.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testcluster"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["testcluster"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "testcluster"}
	kc.CurrentContext = "testcluster"
	return clientcmd.Write(*kc)
}

// WriteKubeconfig writes cfg as a kubeconfig file in a temporary folder
// and returns its path.
func WriteKubeconfig(tb testing.TB, cfg *rest.Config) string {
	tb.Helper()
	buf, err := Kubeconfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Apply creates (or, when they exist, updates) the objects in the YAML
// manifests at paths, as the admin; kinds are those client-go knows.
func (c *Cluster) Apply(tb testing.TB, paths ...string) {
	tb.Helper()
	if err := c.ApplyFiles(context.Background(), paths...); err != nil {
		tb.Fatal(err)
	}
}

// ApplyFiles is Apply for callers without a testing.TB.
func (c *Cluster) ApplyFiles(ctx context.Context, paths ...string) error {
	cl, err := c.NewAdminClient()
	if err != nil {
		return err
	}
	for _, path := range paths {
		if err := apply(ctx, cl, path); err != nil {
			return fmt.Errorf("testcluster: apply %s: %w", path, err)
		}
	}
	return nil
}

func apply(ctx context.Context, cl client.Client, path string) error {
	buf, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLReader(bufioReader(buf))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return err
		}
		o, ok := obj.(client.Object)
		if !ok {
			return fmt.Errorf("%T is not an object", obj)
		}
		err = cl.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			cur := o.DeepCopyObject().(client.Object)
			if err = cl.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				o.SetResourceVersion(cur.GetResourceVersion())
				err = cl.Update(ctx, o)
			}
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
}

func bufioReader(buf []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(buf)) }
