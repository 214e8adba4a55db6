package release

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"
)

// EncoderImageName is the encoder sidecar image's name in the SBOM (its
// repository's last part by default).
const EncoderImageName = "corral-vdi-portal-encoder"

// encoderSBOM returns the encoder image of the Debian root file system
// root (scripts/encoder-rootfs.sh's rootfs/) as an SBOM component of type
// container, and its Debian packages as components, sorted by name: each
// at its version and architecture as the image records it
// (var/lib/dpkg/status.d/NAME, as distroless images do), with its package
// URL, pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-N (N from
// etc/os-release), as image scanners name Debian packages.
func encoderSBOM(root, version string) (cdx.Component, []cdx.Component, error) {
	distro, err := debianRelease(root)
	if err != nil {
		return cdx.Component{}, nil, err
	}
	dir := filepath.Join(root, "var", "lib", "dpkg", "status.d")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return cdx.Component{}, nil, fmt.Errorf("release: SBOM: the encoder image's packages: %w (make its root with scripts/encoder-rootfs.sh)", err)
	}
	var debs []cdx.Component
	for _, e := range entries {
		fields, err := controlFields(filepath.Join(dir, e.Name()))
		if err != nil {
			return cdx.Component{}, nil, err
		}
		name, ver, arch := fields["Package"], fields["Version"], fields["Architecture"]
		if name == "" || ver == "" || arch == "" {
			return cdx.Component{}, nil, fmt.Errorf("release: SBOM: %s has no Package, Version or Architecture (rebuild the root with scripts/encoder-rootfs.sh)", filepath.Join(dir, e.Name()))
		}
		purl := packageurl.NewPackageURL(packageurl.TypeDebian, "debian", name, ver,
			packageurl.QualifiersFromMap(map[string]string{"arch": arch, "distro": distro}), "").ToString()
		debs = append(debs, cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: name, Version: ver, PackageURL: purl})
	}
	if len(debs) == 0 {
		return cdx.Component{}, nil, fmt.Errorf("release: SBOM: no packages in %s (make the root with scripts/encoder-rootfs.sh)", dir)
	}
	slices.SortFunc(debs, func(a, b cdx.Component) int { return strings.Compare(a.Name, b.Name) })
	image := cdx.Component{BOMRef: EncoderImageName + "@" + version, Type: cdx.ComponentTypeContainer, Name: EncoderImageName, Version: version,
		Description: "the H.264 encoder sidecar's image: Debian " + strings.TrimPrefix(distro, "debian-") + " packages and the portal's binary"}
	return image, debs, nil
}

// debianRelease returns root's Debian release as a purl's distro
// qualifier, debian-VERSION_ID (etc/os-release, of base-files).
func debianRelease(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "etc", "os-release"))
	if err != nil {
		return "", fmt.Errorf("release: SBOM: the encoder image's Debian release: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "VERSION_ID="); ok && strings.Trim(v, `"`) != "" {
			return "debian-" + strings.Trim(v, `"`), nil
		}
	}
	return "", fmt.Errorf("release: SBOM: %s names no VERSION_ID", filepath.Join(root, "etc", "os-release"))
}

// controlFields reads a dpkg status entry's fields (a continuation line's
// text is left out: the fields read here have one line).
func controlFields(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("release: SBOM: %w", err)
	}
	fields := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields, s.Err()
}
