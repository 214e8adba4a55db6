package release_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmregistry "helm.sh/helm/v4/pkg/registry"
)

// mustRegistry serves a real OCI registry (CNCF distribution, Debian's
// docker-registry) on a loopback port, its storage in a folder of the
// test's, until the test ends, and returns its host:port. It skips where
// the registry is not installed (make test-deps installs it).
func mustRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("no docker-registry (CNCF distribution): make test-deps installs it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := ln.Addr().String()
	ln.Close() // the registry takes the port
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n  secret: test\n",
		filepath.Join(dir, "data"), host), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return host
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("docker-registry on %s ended: %v\n%s", host, err, logs.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("docker-registry on %s: /v2/ not answered 200 within 30 s (last: %v)\n%s", host, err, logs.String())
		}
	}
}

// TestPush_RealRegistry pushes a release to a real OCI registry on
// loopback as an operator does: the release command with -chart-registry
// (make release's CHART_REGISTRY, helm's registry client) pushes the
// chart, which helm's client pulls back byte for byte; the image tarballs
// (the portal's and the encoder sidecar's, built from the cached Debian
// root of scripts/encoder-rootfs.sh) go with `skopeo copy
// --preserve-digests oci-archive:…` as docs/operating.md says, and the
// registry then serves each at the manifest digest that install.yaml
// pins.
func TestPush_RealRegistry(t *testing.T) {
	host := mustRegistry(t)
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Skip("no skopeo: make test-deps installs it")
	}
	out, err := exec.Command("bash", "../../scripts/encoder-rootfs.sh").Output()
	if err != nil {
		t.Fatalf("scripts/encoder-rootfs.sh: %v\n%s", err, stderrOf(err))
	}
	debian := filepath.Join(strings.TrimSpace(string(out)), "rootfs")
	dir := t.TempDir()
	const version, commit = "v9.8.6", "0123456789abcdef0123456789abcdef01234567"
	bin := buildBinary(t, dir, version, commit)
	dist := filepath.Join(dir, "dist")
	run := exec.Command("go", "run", "./cmd/release", "-version", version, "-commit", commit, "-created", "1767225600", "-binary", bin,
		"-deploy", filepath.Join("..", "..", "deploy"), "-image", host+"/vdi/portal", "-out", dist,
		"-encoder-root", debian, "-encoder-image", host+"/vdi/encoder",
		"-chart-registry", "oci://"+host+"/charts", "-chart-plain-http")
	out, err = run.CombinedOutput()
	if err != nil {
		t.Fatalf("the release command: %v\n%s", err, out)
	}
	ref := host + "/charts/corral-vdi-portal:" + strings.TrimPrefix(version, "v")
	if !strings.Contains(string(out), "chart pushed: oci://"+ref+"\n") {
		t.Errorf("the release command said:\n%s\nwant chart pushed: oci://%s", out, ref)
	}

	// helm pull oci://…, as an operator's helm would.
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(filepath.Join(dir, "none.json")))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(ref)
	if err != nil {
		t.Fatalf("helm pull oci://%s: %v", ref, err)
	}
	charts, err := filepath.Glob(filepath.Join(dist, "corral-vdi-portal-*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("the release's chart: %v %v", charts, err)
	}
	packed, err := os.ReadFile(charts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, packed) {
		t.Errorf("the chart pulled back from the registry (%d bytes) is not the release's (%d bytes)", len(pulled.Chart.Data), len(packed))
	}

	// The images, as docs/operating.md pushes them.
	install, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range []struct{ tarball, repository string }{
		{"corral-vdi-portal-kube-" + version + ".oci.tar", "vdi/portal"},
		{"corral-vdi-portal-encoder-" + version + ".oci.tar", "vdi/encoder"},
	} {
		tag := host + "/" + image.repository + ":" + version
		if out, err := exec.Command("skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", "oci-archive:"+filepath.Join(dist, image.tarball), "docker://"+tag).CombinedOutput(); err != nil {
			t.Fatalf("skopeo copy %s: %v\n%s", image.tarball, err, out)
		}
		// What a kubelet asks the registry: the tag's manifest and its digest.
		req, err := http.NewRequest(http.MethodHead, "http://"+host+"/v2/"+image.repository+"/manifests/"+version, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		digest := resp.Header.Get("Docker-Content-Digest")
		if resp.StatusCode != http.StatusOK || digest == "" {
			t.Fatalf("the registry's manifest of %s: %s, digest %q", tag, resp.Status, digest)
		}
		if pin := "image: " + host + "/" + image.repository + "@" + digest; !strings.Contains(string(install), pin) {
			t.Errorf("the registry serves %s as %s; install.yaml does not pull it (want a line %q)", tag, digest, pin)
		}
	}
}
