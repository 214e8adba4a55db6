package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestHA_BadInput: the Deployment's mistakes an operator makes, on the
// real binary and apiserver. A Secret without its keys: the pod stays
// not ready and says once which Secret lacks which keys. A Secret without
// metrics-token alone (an upgrade): ready, /metrics closed, and the fix. A ServiceAccount
// without its bindings: the portal exits naming each verb on each resource
// it may not use, and where. A pool namespace without deploy/pool-namespace's
// Role: the portal exits with one line naming that namespace only.
func TestHA_BadInput(t *testing.T) {
	c := testcluster.MustStart(t)
	c.StartKubeVirtStandIn(t)
	c.Apply(t, "../deploy/rbac.yaml")

	t.Run("MissingSecret", func(t *testing.T) {
		env := haEnv(t, nil, testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)))
		r := startReplica(t, "no-secret", t.TempDir(), "127.0.0.1:0", env)
		for range 4 { // a kubelet probing
			if code := get(t, r.p.URL+"/readyz", nil); code != 503 {
				t.Fatalf("/readyz without the Secret's keys: %d; want 503", code)
			}
		}
		if code := get(t, r.p.URL+"/healthz", nil); code != 200 {
			t.Errorf("/healthz: %d; want 200 (alive, only not ready: no restart loop)", code)
		}
		log := r.p.Log()
		if n := strings.Count(log, "shared secrets missing"); n != 1 {
			t.Errorf("%d log lines about the missing secrets; want one:\n%s", n, log)
		}
		if n := strings.Count(log, `msg="not ready"`); n != 1 {
			t.Errorf("%d not-ready lines for 4 probes; want one:\n%s", n, log)
		}
		for _, want := range []string{"secret=corral-vdi/corral-vdi-secrets", "keys=session-keys,token-keys,peer-secret,metrics-token", "kubectl -n corral-vdi create secret generic corral-vdi-secrets"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
	})

	// An upgrade from a release that did not ask for metrics-token: the
	// Secret has the other keys. The replica is ready (the rolling update
	// goes through), /metrics answers 503 to everyone with the command
	// that adds the key, and that command, run by a shell, patches the
	// real Secret with a random token and leaves its other keys alone.
	t.Run("SecretWithoutMetricsToken", func(t *testing.T) {
		secrets := deploySecrets(t)
		delete(secrets, "corral-vdi-secrets/metrics-token")
		data := map[string][]byte{}
		for k, v := range secrets {
			data[strings.TrimPrefix(k, "corral-vdi-secrets/")] = []byte(v)
		}
		ctx := context.Background()
		_, err := c.Client.CoreV1().Secrets("corral-vdi").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "corral-vdi-secrets"}, Data: data}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			c.Client.CoreV1().Secrets("corral-vdi").Delete(ctx, "corral-vdi-secrets", metav1.DeleteOptions{})
		})
		env := haEnv(t, secrets, testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)))
		r := startReplica(t, "no-metrics-token", t.TempDir(), "127.0.0.1:0", env)
		waitFor(t, 30*time.Second, "ready without metrics-token", func() bool { return get(t, r.p.URL+"/readyz", nil) == 200 })
		res, err := http.Get(r.p.URL + "/metrics")
		must(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 503 || !strings.Contains(string(body), "patch secret corral-vdi-secrets") {
			t.Errorf("/metrics without metrics-token: %d %s; want 503 with the patch that adds it", res.StatusCode, body)
		}
		log := r.p.Log()
		fixes := logFix.FindAllStringSubmatch(log, -1)
		if n := strings.Count(log, "metrics token missing"); n != 1 || len(fixes) != 1 {
			t.Fatalf("%d log lines about the metrics token, %d fixes; want one:\n%s", n, len(fixes), log)
		}
		fix, err := strconv.Unquote(fixes[0][1])
		must(t, err)
		// The operator's shell runs it; kubectl here prints its arguments,
		// a line a call.
		out, err := exec.Command("sh", "-c", `kubectl() { printf '%s\0' "$@"; echo; }; `+fix).Output()
		must(t, err)
		calls := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		args := strings.Split(strings.TrimSuffix(calls[0], "\x00"), "\x00")
		i := slices.Index(args, "-p")
		if len(calls) != 2 || i < 0 || i+1 >= len(args) || !slices.Equal(args[:5], []string{"-n", "corral-vdi", "patch", "secret", "corral-vdi-secrets"}) ||
			!strings.Contains(calls[1], "rollout\x00restart\x00deployment/corral-vdi-portal") {
			t.Fatalf("the fix %q runs kubectl %q; want a patch of the Secret with -p, then a restart", fix, calls)
		}
		_, err = c.Client.CoreV1().Secrets("corral-vdi").Patch(ctx, args[4], types.MergePatchType, []byte(args[i+1]), metav1.PatchOptions{})
		must(t, err)
		got, err := c.Client.CoreV1().Secrets("corral-vdi").Get(ctx, "corral-vdi-secrets", metav1.GetOptions{})
		must(t, err)
		if tok, err := base64.StdEncoding.DecodeString(string(got.Data["metrics-token"])); err != nil || len(tok) != 32 {
			t.Errorf("after the fix the Secret's metrics-token is %q; want 32 random bytes as base64", got.Data["metrics-token"])
		}
		for k, v := range data {
			if !bytes.Equal(got.Data[k], v) {
				t.Errorf("the fix changed %s", k)
			}
		}
	})

	t.Run("MissingRBAC", func(t *testing.T) {
		ns := c.Namespace(t)
		kubeconfig := testcluster.WriteKubeconfig(t, c.ServiceAccount(t, ns, "corral-vdi-portal"))
		env := haEnv(t, deploySecrets(t), kubeconfig)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve")
		cmd.Env = append(append(os.Environ(), env...), "CORRAL_VDI_LISTEN=127.0.0.1:0", "CORRAL_VDI_DATA_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("the portal without RBAC: %v (%v); want it to exit with an error:\n%s", err, ctx.Err(), out)
		}
		for _, want := range []string{"may not", "watch leases.coordination.k8s.io", "update virtualmachines/start.subresources.kubevirt.io",
			"create pods/exec", "in namespace corral-vdi-desktops", "cluster-wide", "deploy/pool-namespace"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the portal's last words lack %q:\n%s", want, out)
			}
		}
		t.Logf("without RBAC the portal says: %s", lastLine(string(out)))
	})

	t.Run("PoolNamespaceNotBound", func(t *testing.T) {
		// A cluster of its own: the parent's has deploy/rbac.yaml's
		// cluster-wide ClusterRole bound, which grants every namespace.
		c2 := testcluster.MustStart(t)
		given, notBound := "pools-a", "pools-b"
		for _, n := range []string{given, notBound} {
			_, err := c2.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
			must(t, err)
		}
		applyNamespacedRBAC(t, c2, given)
		env := haEnv(t, deploySecrets(t), testcluster.WriteKubeconfig(t, c2.PortalServiceAccount(t)))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve")
		cmd.Env = append(append(os.Environ(), env...), "CORRAL_VDI_LISTEN=127.0.0.1:0", "CORRAL_VDI_DATA_DIR="+t.TempDir(),
			"CORRAL_VDI_POOL_NAMESPACES="+given+","+notBound)
		out, err := cmd.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("the portal with a pool namespace it has no Role in: %v (%v); want it to exit:\n%s", err, ctx.Err(), out)
		}
		last := lastLine(string(out))
		if !strings.Contains(last, "in namespace "+notBound) || strings.Contains(last, "in namespace "+given) || strings.Contains(last, "cluster-wide") ||
			!strings.Contains(last, "apply deploy/pool-namespace in "+notBound) {
			t.Fatalf("the portal's last line %q; want it to name %s only, and the fix:\n%s", last, notBound, out)
		}
		t.Logf("a pool namespace without its Role: %s", last)
	})
}

// logFix is a log line's fix attribute, quoted.
var logFix = regexp.MustCompile(`fix=("(?:[^"\\]|\\.)*")`)

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
