package release_test

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmregistry "helm.sh/helm/v4/pkg/registry"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/release"
)

// checkChart reads the release's chart as an operator's helm would: the
// chart of the release's version, rendering with its own values a
// Deployment that pulls the release's image by digest and, where the
// release has the encoder image (encoder, its repository, not ""), runs
// the encoder sidecar pulled by its digest, the portal's h264 its socket
// (off where it has none); pushed to an OCI registry and pulled back byte
// for byte, as `helm push` and `helm pull oci://…` would.
func checkChart(t *testing.T, f release.Files, version, image, encoder string) {
	t.Helper()
	ch, err := loader.Load(f.Chart)
	if err != nil {
		t.Fatalf("the release's chart: %v", err)
	}
	if ch.Metadata.Version != strings.TrimPrefix(version, "v") || ch.Metadata.AppVersion != version {
		t.Errorf("chart version %s, appVersion %s; want %s and %s", ch.Metadata.Version, ch.Metadata.AppVersion, strings.TrimPrefix(version, "v"), version)
	}
	rendered, err := deploytest.RenderChart(f.Chart, "corral-vdi", "corral-vdi", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploytest.Deployment(rendered.Objects)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image+"@"+f.Digest {
		t.Errorf("the chart's Deployment pulls %s; want %s@%s", got, image, f.Digest)
	}
	var sidecars []string
	for _, c := range d.Spec.Template.Spec.InitContainers {
		sidecars = append(sidecars, c.Name+" "+c.Image)
	}
	h264 := ""
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "CORRAL_VDI_H264" {
			h264 = e.Value
		}
	}
	switch {
	case encoder == "" && (len(sidecars) > 0 || h264 != ""):
		t.Errorf("a release without the encoder image: the chart's sidecars %q, h264 %q; want none (the encoder off)", sidecars, h264)
	case encoder != "" && (len(sidecars) != 1 || sidecars[0] != "encoder "+encoder+"@"+f.EncoderDigest || h264 != "unix:"+release.EncoderSocket):
		t.Errorf("the chart's sidecars %q, h264 %q; want the encoder on by default, encoder %s@%s, h264 unix:%s", sidecars, h264, encoder, f.EncoderDigest, release.EncoderSocket)
	}

	// An OCI registry (go-containerregistry's, served over HTTP).
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, err := release.PushChart(f.Chart, host+"/charts", true); err == nil || !strings.Contains(err.Error(), "want oci://HOST/PATH") {
		t.Errorf("a registry without oci://: %v; want how to name one", err)
	}
	ref, err := release.PushChart(f.Chart, "oci://"+host+"/charts", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/charts/corral-vdi-portal:" + strings.TrimPrefix(version, "v"); ref != want {
		t.Errorf("pushed %s; want %s", ref, want)
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "none.json")))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(ref)
	if err != nil {
		t.Fatalf("helm pull oci://%s: %v", ref, err)
	}
	packed, err := os.ReadFile(f.Chart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, packed) {
		t.Errorf("the chart pulled back (%d bytes) is not the one pushed (%d bytes)", len(pulled.Chart.Data), len(packed))
	}
}

// TestChart_SameBytes: one commit packs its chart to the same bytes (the
// sums of two builds agree), and a chart whose values lost their image
// block is refused rather than shipped unpinned.
func TestChart_SameBytes(t *testing.T) {
	c := release.Config{Version: "v1.2.3", Created: time.Unix(1767225600, 0), Deploy: filepath.Join("..", "..", "deploy"), Image: release.DefaultImage}
	digest := "sha256:" + strings.Repeat("ab", 32)
	var packs [][]byte
	for range 2 {
		c.Out = t.TempDir()
		p, err := release.Chart(c, digest, "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		packs = append(packs, b)
	}
	if !bytes.Equal(packs[0], packs[1]) {
		t.Error("two packs of one chart differ")
	}

	// A deploy folder whose values.yaml has no image digest line.
	bad := t.TempDir()
	src := filepath.Join("..", "..", "deploy")
	if err := os.CopyFS(bad, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(bad, release.ChartDir, "values.yaml")
	raw, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(values, bytes.Replace(raw, []byte("\n  digest: \"\"\n"), []byte("\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Deploy, c.Out = bad, t.TempDir()
	if _, err := release.Chart(c, digest, ""); err == nil || !strings.Contains(err.Error(), `digest: ""`) {
		t.Errorf("a chart without its image digest line: %v; want it refused, naming the line", err)
	}
}
