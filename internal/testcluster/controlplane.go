package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// Versions of KubeVirt's control plane and the snapshot controller; they
// name the cache folder, as in scripts/kubevirt.sh. v1.7.0 is the newest
// KubeVirt whose module graph the Go module proxy serves and sum.golang.org
// vouches for (see scripts/kubevirt.sh).
const (
	KubeVirtVersion    = "v1.7.0"
	SnapshotterVersion = "v8.7.0"
)

// KubeVirtNamespace is where the control plane runs, as a release installs it.
const KubeVirtNamespace = "kubevirt"

// ControlPlaneBinDir returns where scripts/kubevirt.sh puts virt-api,
// virt-controller, kube-controller-manager, snapshot-controller and the
// install YAML: CORRAL_KUBEVIRT_BIN when set, else the version-keyed cache
// folder.
func ControlPlaneBinDir() string {
	if dir := os.Getenv("CORRAL_KUBEVIRT_BIN"); dir != "" {
		return dir
	}
	return filepath.Join(filepath.Dir(filepath.Dir(BinDir())),
		"kubevirt-"+KubeVirtVersion+"-kube-"+KubeVersion+"-snap-"+SnapshotterVersion, "bin")
}

// KubeVirtOptions configure StartKubeVirt.
type KubeVirtOptions struct {
	// FeatureGates go into the KubeVirt CR's developerConfiguration; nil
	// means {"Snapshot"}, which 1.5-1.8 need for snapshots, clones and
	// restores.
	FeatureGates []string
}

// KubeVirt is KubeVirt's own control plane running against a Cluster:
// virt-api (its mutating and validating webhooks, registered with the
// apiserver at a loopback URL under a CA made here), virt-controller (VM,
// VMI, snapshot, restore and clone controllers, leader-elected on a
// Lease), kube-controller-manager's garbage collector, and the CSI
// snapshot-controller, with the CRDs and a KubeVirt CR as a release
// installs them. The node (virt-handler, virt-launcher, the kubelet) and
// the CSI driver are not here: see CSIDriver.
//
// Simplified: the components authenticate as a cluster admin, not with
// their own ServiceAccounts and ClusterRoles; the KubeVirt CR's status
// (which virt-operator writes) is written here.
type KubeVirt struct {
	c     *Cluster
	dir   string
	ca    *kubeVirtCA
	comps map[string]*component // by name (components.go)

	mu        sync.Mutex
	migrating map[types.UID]*standInVMI // migration UID -> a guest its source handed over (node_migration.go)
}

// StartKubeVirt installs and starts KubeVirt's control plane; it is stopped
// when tb ends. It fails tb when the binaries are missing (run
// scripts/kubevirt.sh) or a component does not come up.
func (c *Cluster) StartKubeVirt(tb testing.TB, opts KubeVirtOptions) *KubeVirt {
	tb.Helper()
	bin := ControlPlaneBinDir()
	for _, f := range []string{"virt-api", "virt-controller", "kube-controller-manager", "snapshot-controller", "kubevirt-install.yaml"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			tb.Fatalf("testcluster: %s is missing from %s: run scripts/kubevirt.sh to build KubeVirt %s's control plane once (~25 min cold): %v", f, bin, KubeVirtVersion, err)
		}
	}
	if opts.FeatureGates == nil {
		opts.FeatureGates = []string{"Snapshot"}
	}
	kv := &KubeVirt{c: c, dir: tb.TempDir()}
	tb.Cleanup(kv.stop)
	ctx := context.Background()
	crds, mutating, validating, err := readInstall(filepath.Join(bin, "kubevirt-install.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: crds, Paths: []string{filepath.Join(bin, "crds")}}); err != nil {
		tb.Fatalf("testcluster: install KubeVirt's and the snapshotter's CRDs: %v", err)
	}
	if err := createNamespace(ctx, c.Client, KubeVirtNamespace); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	kubeconfig, err := kv.writeKubeconfig(c, "")
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.bindServiceAccounts(ctx); err != nil {
		tb.Fatal(err)
	}
	controllerKubeconfig, err := kv.writeKubeconfig(c, KubeVirtServiceAccount("kubevirt-controller"))
	if err != nil {
		tb.Fatal(err)
	}
	crt, key, handlerCrt, handlerKey, err := kv.writeCerts()
	if err != nil {
		tb.Fatal(err)
	}
	caPEM := kv.ca.pem
	if err := c.installKubeVirtCR(ctx, opts); err != nil {
		tb.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: KubeVirtNamespace, Name: "kubevirt-ca"}, Data: map[string]string{"ca-bundle": string(caPEM)}}
	if _, err := c.Client.CoreV1().ConfigMaps(KubeVirtNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("testcluster: create the kubevirt-ca ConfigMap: %v", err)
	}

	apiPort := freePort(tb)
	kv.run(tb, filepath.Join(bin, "virt-api"), "--kubeconfig", kubeconfig, "--listen", "127.0.0.1", "--port", strconv.Itoa(apiPort),
		"--tls-cert-file", crt, "--tls-key-file", key, "--handler-cert-file", handlerCrt, "--handler-key-file", handlerKey)
	if err := waitTLS(ctx, apiPort, 90*time.Second); err != nil {
		tb.Fatalf("testcluster: virt-api did not serve on 127.0.0.1:%d: %v\n%s", apiPort, err, kv.Tail("virt-api", 30))
	}
	url := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = loopback(url, mutating.Webhooks[i].ClientConfig, caPEM)
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = loopback(url, validating.Webhooks[i].ClientConfig, caPEM)
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("testcluster: register virt-api's mutating webhooks: %v", err)
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("testcluster: register virt-api's validating webhooks: %v", err)
	}
	admin, err := c.NewAdminClient()
	if err != nil {
		tb.Fatal(err)
	}
	if err := registerSubresources(ctx, admin, "virt-api", int32(apiPort)); err != nil {
		tb.Fatalf("testcluster: register virt-api's subresource API: %v\n%s", err, kv.Tail("virt-api", 30))
	}

	kv.run(tb, filepath.Join(bin, "virt-controller"), "--kubeconfig", controllerKubeconfig, "--port", strconv.Itoa(freePort(tb)),
		"--launcher-image", "corral.test/virt-launcher:"+KubeVirtVersion, "--exporter-image", "corral.test/virt-exportserver:"+KubeVirtVersion,
		"--prom-cert-file", crt, "--prom-key-file", key)
	kv.run(tb, filepath.Join(bin, "snapshot-controller"), "--kubeconfig", kubeconfig, "--leader-election=false",
		"--kube-api-qps", "200", "--kube-api-burst", "400", "--retry-interval-max", "5s")
	kv.run(tb, filepath.Join(bin, "kube-controller-manager"), "--kubeconfig", kubeconfig, "--controllers", "garbagecollector",
		"--leader-elect=false", "--secure-port", "0", "--use-service-account-credentials=false")
	if err := poll(ctx, 2*time.Minute, func() bool {
		l, err := c.Client.CoordinationV1().Leases(KubeVirtNamespace).Get(ctx, "virt-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}); err != nil {
		tb.Fatalf("testcluster: virt-controller did not take its leader Lease: %v\n%s", err, kv.Tail("virt-controller", 30))
	}
	return kv
}

// readInstall reads what scripts/kubevirt.sh generated with KubeVirt's own
// operator code: CRDs and virt-api's webhook configurations.
func readInstall(path string) ([]*apiextensionsv1.CustomResourceDefinition, *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("testcluster: read KubeVirt's install YAML: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	var mutating *admissionregistrationv1.MutatingWebhookConfiguration
	var validating *admissionregistrationv1.ValidatingWebhookConfiguration
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, nil, nil, fmt.Errorf("testcluster: %s: %w", path, err)
		}
		switch meta.Kind {
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err = yaml.Unmarshal([]byte(doc), crd)
			crds = append(crds, crd)
		case "MutatingWebhookConfiguration":
			mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = yaml.Unmarshal([]byte(doc), mutating)
		case "ValidatingWebhookConfiguration":
			validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = yaml.Unmarshal([]byte(doc), validating)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("testcluster: %s: %s: %w", path, meta.Kind, err)
		}
	}
	if len(crds) == 0 || mutating == nil || validating == nil {
		return nil, nil, nil, fmt.Errorf("testcluster: %s lacks CRDs or webhook configurations: rerun scripts/kubevirt.sh", path)
	}
	return crds, mutating, validating, nil
}

// loopback points a webhook at virt-api on loopback, on the path its
// Service reference names.
func loopback(url string, cc admissionregistrationv1.WebhookClientConfig, ca []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := url + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
}

// installKubeVirtCR creates the KubeVirt CR with its status as virt-operator
// leaves it once deployed, which virt-api and virt-controller read their
// configuration from.
func (c *Cluster) installKubeVirtCR(ctx context.Context, opts KubeVirtOptions) error {
	cl, err := c.NewAdminClient()
	if err != nil {
		return err
	}
	cr := &kubevirtv1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Namespace: KubeVirtNamespace, Name: "kubevirt"},
		Spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{FeatureGates: opts.FeatureGates},
		}},
	}
	if err := cl.Create(ctx, cr); err != nil {
		return fmt.Errorf("testcluster: create the KubeVirt CR: %w", err)
	}
	cr.Status = kubevirtv1.KubeVirtStatus{Phase: kubevirtv1.KubeVirtPhaseDeployed,
		ObservedKubeVirtVersion: KubeVirtVersion, TargetKubeVirtVersion: KubeVirtVersion,
		ObservedDeploymentID: "corral-test", TargetDeploymentID: "corral-test", DefaultArchitecture: runtime.GOARCH,
		Conditions: []kubevirtv1.KubeVirtCondition{{Type: kubevirtv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue, Reason: "AllComponentsReady"}}}
	if err := cl.Status().Update(ctx, cr); err != nil {
		return fmt.Errorf("testcluster: write the KubeVirt CR's status: %w", err)
	}
	return nil
}

// writeKubeconfig writes the cluster admin's credentials for the
// components; with as set, the admin impersonates that user (a KubeVirt
// ServiceAccount's name: virt-api keeps VMI status changes from anyone
// else, see KubeVirtServiceAccount).
func (kv *KubeVirt) writeKubeconfig(c *Cluster, as string) (string, error) {
	name := "kubeconfig"
	if as != "" {
		name += "-" + as[strings.LastIndex(as, ":")+1:]
	}
	path := filepath.Join(kv.dir, name)
	if err := c.WriteKubeconfig(path, as); err != nil {
		return "", fmt.Errorf("testcluster: write the control plane's kubeconfig: %w", err)
	}
	return path, nil
}

// WriteKubeconfig writes the cluster admin's credentials to path as a
// kubeconfig file (what kubectl and helm read); with as set, the admin
// impersonates that user.
func (c *Cluster) WriteKubeconfig(path, as string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData, Token: c.Config.BearerToken, Impersonate: as}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, path)
}

// KubeVirtServiceAccount returns the user name of KubeVirt's ServiceAccount
// name (kubevirt-controller, kubevirt-handler, kubevirt-apiserver): virt-api's
// VMI mutating webhook drops status changes made by any other user
// (pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go), so
// virt-controller and the node stand-in act as these.
func KubeVirtServiceAccount(name string) string {
	return "system:serviceaccount:" + KubeVirtNamespace + ":" + name
}

// bindServiceAccounts gives KubeVirt's ServiceAccounts cluster-admin.
// Simplified: a release gives each its own ClusterRole.
func (c *Cluster) bindServiceAccounts(ctx context.Context) error {
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "corral-test-kubevirt-components"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
	for _, sa := range []string{"kubevirt-controller", "kubevirt-handler", "kubevirt-apiserver"} {
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: KubeVirtNamespace, Name: sa})
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testcluster: bind KubeVirt's ServiceAccounts: %w", err)
	}
	return nil
}

// writeCerts makes the KubeVirt CA and, signed by it, virt-api's serving
// certificate for 127.0.0.1 and the client certificate it shows
// virt-handler; it returns their files and the CA's PEM.
func (kv *KubeVirt) writeCerts() (crt, key, handlerCrt, handlerKey string, err error) {
	if kv.ca, err = newKubeVirtCA(); err != nil {
		return "", "", "", "", err
	}
	files := map[string][]byte{}
	files["tls.crt"], files["tls.key"], err = kv.ca.issue("virt-api", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return "", "", "", "", err
	}
	files["handler.crt"], files["handler.key"], err = kv.ca.issue(cnHandlerClient, nil, nil)
	if err != nil {
		return "", "", "", "", err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(kv.dir, name), b, 0o600); err != nil {
			return "", "", "", "", err
		}
	}
	return filepath.Join(kv.dir, "tls.crt"), filepath.Join(kv.dir, "tls.key"), filepath.Join(kv.dir, "handler.crt"), filepath.Join(kv.dir, "handler.key"), nil
}

// waitTLS waits until a TLS server answers on 127.0.0.1:port.
func waitTLS(ctx context.Context, port int, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var last error
	err := poll(ctx, timeout, func() bool {
		res, err := hc.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/")
		if err != nil {
			last = err
			return false
		}
		res.Body.Close()
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

// poll calls ok every 200 ms until it reports true, or timeout.
func poll(ctx context.Context, timeout time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
