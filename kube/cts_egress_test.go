package kube_test

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCTEgressFence types into two CT desktops' terminals (pods/exec, as a
// user does) on a pod network that enforces NetworkPolicy egress (the
// stand-in CNI: the node's network holds the cloud metadata address, the
// API server behind the kubernetes Service's ClusterIP, and an internet
// address), and tries each. Before the pool namespace kit's policies both
// reach all three; with them, a desktop of a pool without network reaches
// none, and one whose pool's policy says "outbound" reaches the internet
// only (#55: a CT desktop cannot reach 169.254.169.254 or the API server).
func TestCTEgressFence(t *testing.T) {
	s := newCTSetup(t)
	podnet := s.kubelet.StartPodNetwork(t, s.c.Config.Host)
	for name, policy := range map[string]string{"shut": `{}`, "out": `{"network": "outbound"}`} {
		s.configMap(t, name, map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1",
			kube.CTKeyShell: `["/bin/sh"]`, kube.CTKeyPolicy: policy})
	}
	desks := map[string]vdi.Desktop{}
	for user, pool := range map[string]string{"alice": "shut", "bob": "out"} {
		d, err := s.svc.Claim(s.ctx, vdi.Identity{Login: user}, s.ns, pool)
		if err != nil {
			t.Fatalf("%s's claim of %s: %v", user, pool, err)
		}
		desks[pool] = d
		podnet.Attach(t, s.pod(t, d.Name))
	}
	all := map[string]string{testcluster.PodNetMetadata: "open", testcluster.PodNetAPIServer: "open", testcluster.PodNetInternet: "open"}
	for pool := range desks {
		s.reaches(t, desks[pool], "before the kit's policies", all)
	}

	kit, err := deploytest.RenderPoolNamespace(filepath.Join("..", "deploy"), s.ns)
	if err != nil {
		t.Fatal(err)
	}
	var policies []*unstructured.Unstructured
	for _, u := range kit {
		if u.GetKind() == "NetworkPolicy" {
			policies = append(policies, u)
		}
	}
	if _, err := deploytest.Apply(s.c.Config, policies, false); err != nil {
		t.Fatal(err)
	}
	for pool := range desks {
		podnet.Enforce(t, s.pod(t, desks[pool].Name))
	}
	s.reaches(t, desks["shut"], "with the kit's policies, a pool without network",
		map[string]string{testcluster.PodNetMetadata: "shut", testcluster.PodNetAPIServer: "shut", testcluster.PodNetInternet: "shut"})
	s.reaches(t, desks["out"], "with the kit's policies, an outbound pool",
		map[string]string{testcluster.PodNetMetadata: "shut", testcluster.PodNetAPIServer: "shut", testcluster.PodNetInternet: "open"})
}

// reaches types into d's terminal a TCP connect to each address of want
// (bash's /dev/tcp) and checks which open.
func (s *ctSetup) reaches(t *testing.T, d vdi.Desktop, when string, want map[string]string) {
	t.Helper()
	conn, err := s.exec.Dial(s.ctx, d.Ref(), vdi.ProtocolTerminal)
	if err != nil {
		t.Fatalf("%s's terminal: %v", d.Name, err)
	}
	defer conn.Close()
	script := `for a in`
	for addr := range want {
		script += " " + addr
	}
	script += `; do if bash -c "exec 3<>/dev/tcp/${a%:*}/${a#*:}" 2>/dev/null; then echo "R=$a=open"; else echo "R=$a=shut"; fi; done; echo "R=$((40+2))=done"` + "\n"
	if _, err := conn.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for !regexp.MustCompile(`R=42=done`).Match(out) {
		n, err := conn.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			t.Fatalf("%s's terminal printed %q, then %v", d.Name, out, err)
		}
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`R=([0-9.]+:[0-9]+)=(open|shut)`).FindAllStringSubmatch(string(out), -1) {
		got[m[1]] = m[2]
	}
	for addr, w := range want {
		if got[addr] != w {
			t.Errorf("%s: %s (pool %s) finds %s %q; want %s", when, d.Name, d.Pool, addr, got[addr], w)
		}
	}
}
