package release

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteLayout writes img as an OCI image layout (index.json, oci-layout,
// blobs/sha256/…) tagged version, packed in the tarball at out: what
// `skopeo copy oci-archive:` reads, and what `crane push` and
// `oras cp --from-oci-layout` read once unpacked.
func WriteLayout(out string, img v1.Image, version string, at time.Time) error {
	dir, err := os.MkdirTemp("", "corral-vdi-release-")
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("release: OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return fmt.Errorf("release: OCI layout: %w", err)
	}
	return packDir(out, dir, at)
}

// packDir writes dir's files into the tarball out, in lexical order with
// one time, so that one image always makes one tarball.
func packDir(out, dir string, at time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: at.UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		fi, err := src.Stat()
		if err != nil {
			return err
		}
		h.Size = fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release: pack %s: %w", out, err)
	}
	return nil
}
