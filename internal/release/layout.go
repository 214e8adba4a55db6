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
	err := writeTar(out, dir, func(rel, _ string, d fs.DirEntry) (*tar.Header, error) {
		if d.IsDir() {
			return &tar.Header{Name: rel, Mode: 0o755, ModTime: at.UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeDir}, nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil, err
		}
		return &tar.Header{Name: rel, Mode: 0o644, Size: fi.Size(), ModTime: at.UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeReg}, nil
	})
	if err != nil {
		return fmt.Errorf("release: pack %s: %w", out, err)
	}
	return nil
}

// writeTar writes root's entries into a new tar file out, in lexical
// order, each with the header head makes of it (rel is its slash-separated
// path in root, a folder's ending in "/"; p its path here); a regular
// file's header is followed by its content.
func writeTar(out, root string, head func(rel, p string, d fs.DirEntry) (*tar.Header, error)) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		h, err := head(rel, p, d)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil || h.Typeflag != tar.TypeReg {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
