// Package release makes what `make release VERSION=vX.Y.Z` ships, without
// a container daemon: the kube image and the H.264 encoder sidecar's image
// as OCI image layout tarballs (go-containerregistry), deploy/ rendered
// into install.yaml with both images pinned by digest (kustomize's Go
// API), the Helm chart packaged for the release and pinned the same way
// (pushed to an OCI registry when asked), a CycloneDX SBOM of the
// binary's modules and the encoder image's Debian packages, and SHA256SUMS
// of them all.
package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// DefaultImage is the repository install.yaml names unless told another:
// where a release is pushed.
const DefaultImage = "ghcr.io/corral-dev/corral-vdi-portal-kube"

// DefaultEncoderImage is the repository the encoder sidecar's image is
// pulled from unless told another (Config.EncoderRepository).
const DefaultEncoderImage = "ghcr.io/corral-dev/corral-vdi-portal-encoder"

// Source is the project's repository, the image's source label.
const Source = "https://github.com/corral-dev/corral-vdi-portal"

// Config says what to release.
type Config struct {
	// Binary is the static portal binary (scripts/build-binary.sh's).
	Binary string
	// Version is the release, vX.Y.Z.
	Version string
	// Commit is the git revision the binary was built from.
	Commit string
	// Created is the image's creation time (the commit's, so that a
	// rebuild of one commit gives the same digest).
	Created time.Time
	// Deploy is the kustomize base to render (deploy/).
	Deploy string
	// Image is the repository install.yaml pulls from; DefaultImage when
	// empty.
	Image string
	// CACerts is the CA bundle the image carries (Debian's
	// /etc/ssl/certs/ca-certificates.crt when empty).
	CACerts string
	// Out is the folder the files go to (dist/).
	Out string
	// EncoderRoot, when set, is the encoder image's Debian root file
	// system (scripts/encoder-rootfs.sh's rootfs/): Build then writes the
	// encoder sidecar's image too (EncoderImage), and install.yaml and
	// the chart run it, pinned by digest, beside every portal.
	EncoderRoot string
	// EncoderRepository is the repository install.yaml and the chart pull
	// the encoder image from; DefaultEncoderImage when empty.
	EncoderRepository string
}

// encoderRepository is c.EncoderRepository, or DefaultEncoderImage.
func (c Config) encoderRepository() string {
	if c.EncoderRepository == "" {
		return DefaultEncoderImage
	}
	return c.EncoderRepository
}

// Files are the paths Build wrote.
type Files struct {
	Image, Install, Chart, SBOM, Sums string
	// Digest is the image manifest's digest that install.yaml pins.
	Digest string
	// EncoderImage and EncoderDigest are the encoder sidecar's image and
	// its digest, when Config.EncoderRoot asked for it.
	EncoderImage, EncoderDigest string
}

var semver = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Build writes the release files into c.Out.
func Build(c Config) (Files, error) {
	if !semver.MatchString(c.Version) {
		return Files{}, fmt.Errorf("release: VERSION %q is not vMAJOR.MINOR.PATCH (e.g. make release VERSION=v0.3.0)", c.Version)
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.CACerts == "" {
		c.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return Files{}, fmt.Errorf("release: %w", err)
	}
	f := Files{
		Image:   filepath.Join(c.Out, "corral-vdi-portal-kube-"+c.Version+".oci.tar"),
		Install: filepath.Join(c.Out, "install.yaml"),
		SBOM:    filepath.Join(c.Out, "sbom.cdx.json"),
		Sums:    filepath.Join(c.Out, "SHA256SUMS"),
	}
	img, err := Image(c)
	if err != nil {
		return Files{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Files{}, fmt.Errorf("release: image digest: %w", err)
	}
	f.Digest = digest.String()
	if err := WriteLayout(f.Image, img, c.Version, c.Created); err != nil {
		return Files{}, err
	}
	shipped := []string{f.Image}
	if c.EncoderRoot != "" {
		// First, so that install.yaml and the chart pin its digest.
		f.EncoderImage = filepath.Join(c.Out, "corral-vdi-portal-encoder-"+c.Version+".oci.tar")
		if f.EncoderDigest, err = writeEncoderImage(c, f.EncoderImage); err != nil {
			return Files{}, err
		}
		shipped = append(shipped, f.EncoderImage)
	}
	manifest, err := Install(c, f.Digest, f.EncoderDigest)
	if err != nil {
		return Files{}, err
	}
	if err := os.WriteFile(f.Install, manifest, 0o644); err != nil {
		return Files{}, fmt.Errorf("release: %w", err)
	}
	if f.Chart, err = Chart(c, f.Digest, f.EncoderDigest); err != nil {
		return Files{}, err
	}
	if err := WriteSBOM(f.SBOM, c); err != nil {
		return Files{}, err
	}
	shipped = append(shipped, f.Install, f.Chart, f.SBOM)
	if err := WriteSums(f.Sums, shipped...); err != nil {
		return Files{}, err
	}
	return f, nil
}

// writeEncoderImage writes the encoder image of c.EncoderRoot to out and
// returns its digest.
func writeEncoderImage(c Config, out string) (string, error) {
	work, err := os.MkdirTemp("", "corral-vdi-encoder-")
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(work)
	img, err := EncoderImage(c, c.EncoderRoot, work)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("release: encoder image digest: %w", err)
	}
	if err := WriteLayout(out, img, c.Version, c.Created); err != nil {
		return "", err
	}
	return digest.String(), nil
}
