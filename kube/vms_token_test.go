package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestSubresourcePathTokenRotation opens consoles through the apiserver as
// a pod does: the portal's ServiceAccount token in a file that the kubelet
// rotates. The token is bound to a Secret, so deleting the Secret revokes
// it, as expiry ends a rotated-out projected token; consoles keep opening
// with the file's new token.
func TestSubresourcePathTokenRotation(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	ref := vdi.Ref{Namespace: ns, Name: "rot-1"}
	testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "rot"})
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "token")
	tokenA := boundToken(t, s.c.Client, "rot-a")
	if err := os.WriteFile(file, []byte(tokenA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// As rest.InClusterConfig makes it: the token read at start, and its file.
	cfg := rest.AnonymousClientConfig(s.sa)
	cfg.BearerToken, cfg.BearerTokenFile = tokenA, file
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	open := func(when string) {
		t.Helper()
		conn, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
		if err != nil {
			t.Fatalf("VNC through the apiserver %s: %v", when, err)
		}
		defer conn.Close()
		mustRFB(t, conn)
	}
	open("with the first token")

	// The kubelet writes a new token; the old one stops working.
	tokenB := boundToken(t, s.c.Client, "rot-b")
	if err := os.WriteFile(file, []byte(tokenB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Client.CoreV1().Secrets("corral-vdi").Delete(ctx, "rot-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := rest.AnonymousClientConfig(s.sa)
	old.BearerToken = tokenA
	oldClient := kubernetes.NewForConfigOrDie(old)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := oldClient.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first token still works after its Secret went: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	open("after the token rotated")
}

// boundToken returns a token of the portal's ServiceAccount bound to a new
// Secret named secret: it stops working when the Secret is deleted.
func boundToken(t *testing.T, cs kubernetes.Interface, secret string) string {
	t.Helper()
	ctx := context.Background()
	sec, err := cs.CoreV1().Secrets("corral-vdi").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Secrets("corral-vdi").Delete(context.Background(), secret, metav1.DeleteOptions{}) })
	hour := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts("corral-vdi").CreateToken(ctx, "corral-vdi-portal", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: secret, UID: sec.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}
