package release_test

import (
	"archive/tar"
	"context"
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
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/package-url/packageurl-go"

	"github.com/corral-dev/corral-vdi-portal/internal/release"
	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// TestEncoderImage makes a release with the encoder sidecar's image, built
// without a daemon from Debian's packages (scripts/encoder-rootfs.sh, a
// cached download), reads the image back from its OCI layout tarball,
// unpacks its layers into a folder and runs it there as a kubelet would:
// its entry point and arguments, as its user, in that root (chroot). The
// startup probe's `test -S` sees the socket, and one screen sent through
// the socket as a hub sends it comes back as an H.264 key frame. No file
// in the image is set-user or set-group, and image scanners find its
// Debian packages (var/lib/dpkg/status.d, etc/os-release). The release's
// install.yaml and chart run that image, pinned by its digest, beside
// every portal (the chart's encoder on by default). Its SBOM lists the
// image's Debian packages at their pinned versions (checkEncoderSBOM).
func TestEncoderImage(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs the image in a chroot: needs root")
	}
	out, err := exec.Command("bash", "../../scripts/encoder-rootfs.sh").Output()
	if err != nil {
		t.Fatalf("scripts/encoder-rootfs.sh: %v\n%s", err, stderrOf(err))
	}
	debian := filepath.Join(strings.TrimSpace(string(out)), "rootfs")
	dir := t.TempDir()
	const version, commit = "v9.8.7", "0123456789abcdef0123456789abcdef01234567"
	bin := buildBinary(t, dir, version, commit)
	f, err := release.Build(release.Config{Binary: bin, Version: version, Commit: commit, Created: time.Unix(1767225600, 0),
		Deploy: filepath.Join("..", "..", "deploy"), Image: "registry.example.com/vdi/portal", Out: filepath.Join(dir, "dist"), EncoderRoot: debian,
		EncoderRepository: "registry.example.com/vdi/encoder"})
	if err != nil {
		t.Fatal(err)
	}
	checkEncoderSBOM(t, f.SBOM, "../../scripts/encoder-packages.txt")
	checkInstall(t, f, "registry.example.com/vdi/portal@"+f.Digest, "registry.example.com/vdi/encoder@"+f.EncoderDigest)
	checkChart(t, f, version, "registry.example.com/vdi/portal", "registry.example.com/vdi/encoder")
	sums, err := os.ReadFile(f.Sums)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sums), "  "+filepath.Base(f.EncoderImage)+"\n") {
		t.Errorf("SHA256SUMS:\n%s\nwant a line for %s", sums, filepath.Base(f.EncoderImage))
	}

	img := layoutImage(t, f.EncoderImage, filepath.Join(dir, "layout"), version, f.EncoderDigest)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != release.User {
		t.Errorf("user %q; want the non-root %s", cf.Config.User, release.User)
	}
	args := append(append([]string{}, cf.Config.Entrypoint...), cf.Config.Cmd...)
	if want := release.Entrypoint + " encoder -socket " + release.EncoderSocket; strings.Join(args, " ") != want {
		t.Errorf("entry point and arguments %q; want %q", args, want)
	}

	root := filepath.Join(dir, "root")
	if special := unpack(t, img, root); len(special) > 0 {
		t.Errorf("set-user or set-group files in the image: %v", special)
	}
	// Image scanners find its Debian packages, as in distroless images.
	for _, want := range []string{"etc/os-release", "var/lib/dpkg/status.d/gstreamer1.0-plugins-ugly", "var/lib/dpkg/status.d/libx264-164"} {
		if _, err := os.Stat(filepath.Join(root, want)); err != nil {
			t.Errorf("the image has no %s: %v", want, err)
		}
	}
	uid, gid, _ := strings.Cut(cf.Config.User, ":")
	cmd := exec.Command("chroot", append([]string{"--userspec=" + uid + ":" + gid, root}, args...)...)
	cmd.Env = cf.Config.Env
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the encoder's log:\n%s", log.String())
		}
	}()
	// The sidecar's startup probe, run in the image as the kubelet runs
	// it (deploy/overlays/h264): it passes once the service listens.
	probe := func() error {
		return exec.Command("chroot", "--userspec="+uid+":"+gid, root, "test", "-S", release.EncoderSocket).Run()
	}
	deadline := time.Now().Add(60 * time.Second)
	for probe() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the startup probe (test -S %s) did not pass within 60 s", release.EncoderSocket)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rfb.CheckH264(ctx, "unix:"+filepath.Join(root, release.EncoderSocket)); err != nil {
		t.Fatalf("a screen through the image's encoder: %v", err)
	}
}

// buildBinary links the static portal binary with version and commit
// into dir, as scripts/build-binary.sh does, and returns its path.
func buildBinary(t *testing.T, dir, version, commit string) string {
	t.Helper()
	bin := filepath.Join(dir, "corral-vdi-portal")
	pkg := "github.com/corral-dev/corral-vdi-portal/portal"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X "+pkg+".version="+version+" -X "+pkg+".commit="+commit,
		"-o", bin, "../../cmd/corral-vdi-portal")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stderrOf is what a command that failed wrote to its standard error.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// unpack writes img's file system into dir as a container runtime does
// (folders, files with their modes and owners, symbolic and hard links)
// and returns the files that are set-user or set-group.
func unpack(t *testing.T, img v1.Image, dir string) []string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var special []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return special
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("the image's %q is outside its root", h.Name)
		}
		if h.Mode&0o6000 != 0 {
			special = append(special, h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeDir {
			os.Remove(p) // a later layer's file replaces an earlier one's, never writes through its link
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeLink:
			err = os.Link(filepath.Join(dir, filepath.FromSlash(h.Linkname)), p)
		case tar.TypeReg:
			var w *os.File
			if w, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(w, tr)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
		default:
			continue
		}
		if err == nil && h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink {
			mode := os.FileMode(h.Mode).Perm()
			if h.Mode&0o1000 != 0 {
				mode |= os.ModeSticky
			}
			if err = os.Chmod(p, mode); err == nil {
				err = os.Lchown(p, h.Uid, h.Gid)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkEncoderSBOM reads the release's SBOM at path as an image scanner
// would: it lists the encoder image as a container that depends on Debian
// packages, each named by its package URL
// (pkg:deb/debian/NAME@VERSION?arch=…&distro=debian-N), and those are
// exactly the packages and versions of the pin file (name=version
// lines, scripts/encoder-packages.txt).
func checkEncoderSBOM(t *testing.T, path, pinFile string) {
	t.Helper()
	raw, err := os.ReadFile(pinFile)
	if err != nil {
		t.Fatal(err)
	}
	var pins []string
	for line := range strings.Lines(string(raw)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pins = append(pins, line)
		}
	}
	sf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(sf, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	var listed, refs []string
	image := ""
	for _, c := range *bom.Components {
		if c.Type == cdx.ComponentTypeContainer && c.Name == release.EncoderImageName {
			image = c.BOMRef
		}
		if !strings.HasPrefix(c.PackageURL, "pkg:deb/") {
			continue
		}
		p, err := packageurl.FromString(c.PackageURL)
		if err != nil {
			t.Errorf("component %s: package URL %q: %v", c.Name, c.PackageURL, err)
			continue
		}
		q := p.Qualifiers.Map()
		if p.Namespace != "debian" || p.Name != c.Name || p.Version != c.Version || (q["arch"] != "amd64" && q["arch"] != "all") || !strings.HasPrefix(q["distro"], "debian-") {
			t.Errorf("component %s %s: package URL %q; want pkg:deb/debian/%s@%s?arch=amd64 or all&distro=debian-N", c.Name, c.Version, c.PackageURL, c.Name, c.Version)
		}
		listed, refs = append(listed, p.Name+"="+p.Version), append(refs, c.BOMRef)
	}
	slices.Sort(pins)
	slices.Sort(listed)
	if !slices.Equal(listed, pins) {
		t.Errorf("the SBOM's Debian packages are not the pinned ones:\n%s", cmp.Diff(pins, listed))
	}
	var deps []string
	for _, d := range *bom.Dependencies {
		if d.Ref == image && d.Dependencies != nil {
			deps = *d.Dependencies
		}
	}
	slices.Sort(refs)
	slices.Sort(deps)
	if image == "" || !slices.Equal(deps, refs) {
		t.Errorf("the SBOM's encoder image %q depends on %d components; want a container %s depending on its %d Debian packages", image, len(deps), release.EncoderImageName, len(refs))
	}
}
