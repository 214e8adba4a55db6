package release_test

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/corral-dev/corral-vdi-portal/internal/release"
)

// TestBuild makes a release of a freshly linked static binary, then reads
// it as an operator's tools would: the OCI layout tarball with
// go-containerregistry (config, labels, the binary inside, which runs and
// reports the version and commit), install.yaml pinned to the image's
// digest, the Helm chart (checkChart), the SBOM and SHA256SUMS.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	const version, commit = "v9.8.7", "0123456789abcdef0123456789abcdef01234567"
	bin := buildBinary(t, dir, version, commit)
	out := filepath.Join(dir, "dist")
	f, err := release.Build(release.Config{Binary: bin, Version: version, Commit: commit, Created: time.Unix(1767225600, 0),
		Deploy: filepath.Join("..", "..", "deploy"), Image: "registry.example.com/vdi/portal", Out: out})
	if err != nil {
		t.Fatal(err)
	}

	img := layoutImage(t, f.Image, filepath.Join(dir, "layout"), version, f.Digest)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || strings.HasPrefix(cf.Config.User, "0") {
		t.Errorf("user %q; want the non-root 65532:65532", cf.Config.User)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/local/bin/corral-vdi-portal" {
		t.Errorf("entrypoint %q", got)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": version, "org.opencontainers.image.revision": commit,
		"org.opencontainers.image.source": release.Source} {
		if cf.Config.Labels[k] != want {
			t.Errorf("label %s = %q; want %q", k, cf.Config.Labels[k], want)
		}
	}
	if cf.OS != "linux" {
		t.Errorf("os %q", cf.OS)
	}

	// The binary in the image runs and says which build it is.
	inImage := filepath.Join(dir, "from-image")
	files := extract(t, img, inImage, "usr/local/bin/corral-vdi-portal")
	for _, want := range []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt"} {
		if !files[want] {
			t.Errorf("the image has no %s", want)
		}
	}
	got, err := exec.Command(inImage, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) || !strings.Contains(string(got), commit) {
		t.Fatalf("version of the image's binary: %v %q; want %s and %s", err, got, version, commit)
	}
	t.Logf("the image's binary: %s", strings.TrimSpace(string(got)))

	// install.yaml pulls exactly that image.
	checkInstall(t, f, "registry.example.com/vdi/portal@"+f.Digest)
	checkChart(t, f, version, "registry.example.com/vdi/portal", "")

	// The SBOM lists the modules linked in.
	sf, err := os.Open(f.SBOM)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(sf, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range *bom.Components {
		names = append(names, c.Name)
	}
	for _, want := range []string{"k8s.io/client-go", "github.com/gorilla/websocket", "stdlib"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("SBOM components %v; want %s", names, want)
		}
	}
	if bom.Metadata.Component.Version != version {
		t.Errorf("SBOM of %+v; want version %s", bom.Metadata.Component, version)
	}

	// SHA256SUMS checks, as sha256sum -c would.
	sums, err := os.ReadFile(f.Sums)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	if len(lines) != 4 {
		t.Fatalf("SHA256SUMS:\n%s\nwant four files", sums)
	}
	for _, l := range lines {
		sum, name, _ := strings.Cut(l, "  ")
		raw, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(raw); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS says %s for %s; it is %x", sum, name, h)
		}
	}
}

// TestBuild_BadVersion: a version that is not vX.Y.Z is refused with
// what to type.
func TestBuild_BadVersion(t *testing.T) {
	_, err := release.Build(release.Config{Version: "0.3", Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "VERSION=v0.3.0") {
		t.Fatalf("Build with version 0.3: %v; want how to name a version", err)
	}
}

func untar(t *testing.T, tarball, dir string) {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// extract writes the file name of img's file system to out and returns
// which files the image has.
func extract(t *testing.T, img v1.Image, out, name string) map[string]bool {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = true
		if h.Name != name {
			continue
		}
		if h.Mode&0o111 == 0 || h.Uid != 0 {
			t.Errorf("%s: mode %o uid %d; want root-owned and executable", name, h.Mode, h.Uid)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !files[name] {
		t.Fatalf("the image has no %s; it has %v", name, files)
	}
	return files
}

// layoutImage reads the OCI image layout tarball into dir and returns its
// image, which must be its only one, tagged version, of the digest Build
// reported.
func layoutImage(t *testing.T, tarball, dir, version, digest string) v1.Image {
	t.Helper()
	untar(t, tarball, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("index of %s %+v; want one image named %s", filepath.Base(tarball), im.Manifests, version)
	}
	if d := im.Manifests[0].Digest.String(); d != digest {
		t.Fatalf("the layout's image %s; Build reported %s", d, digest)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkInstall reads the release's install.yaml: its containers pull
// exactly the images want (each image@digest), and nothing by tag.
func checkInstall(t *testing.T, f release.Files, want ...string) {
	t.Helper()
	manifest, err := os.ReadFile(f.Install)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(manifest), "\n") {
		if image, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok {
			got = append(got, image)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("install.yaml pulls %q; want exactly %q, pinned by digest", got, want)
	}
}
