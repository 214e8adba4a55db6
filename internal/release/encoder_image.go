package release

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// EncoderSocket is where the encoder image's service listens, in the
// volume deploy/overlays/h264 shares with the portal container.
const EncoderSocket = "/run/corral-vdi-encoder/h264.sock"

// EncoderImage builds the encoder sidecar's image (the Dockerfile's
// encoder stage, without a daemon): a layer of debian, Debian's
// GStreamer packages unpacked by scripts/encoder-rootfs.sh, and a layer
// with the static binary, the non-root user and the folders the sidecar
// writes. Its entry point is `corral-vdi-portal encoder -socket
// EncoderSocket`. The first layer's tar is kept in work (some 200 MiB),
// which the caller removes once the image is written.
func EncoderImage(c Config, debian, work string) (v1.Image, error) {
	if _, err := os.Stat(filepath.Join(debian, "usr", "bin", "gst-launch-1.0")); err != nil {
		return nil, fmt.Errorf("release: the encoder's root file system %s has no usr/bin/gst-launch-1.0 (make it with scripts/encoder-rootfs.sh): %w", debian, err)
	}
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("release: the binary: %w (build it with scripts/build-binary.sh)", err)
	}
	packages, err := dirLayer(debian, filepath.Join(work, "debian.tar"), c.Created)
	if err != nil {
		return nil, err
	}
	own, err := rootfs(c.Created, append(ownFiles(bin),
		file{name: "run/", mode: 0o755},
		file{name: "run/corral-vdi-encoder/", mode: 0o700, owner: UID},
	))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), packages, own)
	if err != nil {
		return nil, fmt.Errorf("release: encoder image: %w", err)
	}
	return configure(img, c, "corral-vdi-portal-encoder", "the H.264 encoder sidecar of corral-vdi-portal on the Kubernetes backend", v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Cmd:        []string{"encoder", "-socket", EncoderSocket},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
	})
}

// dirLayer is the folder root as a layer: its entries in lexical order,
// owned by root, with one time, and no set-user or set-group bits (the
// encoder runs as 65532 and needs none: a Debian package's passwd or
// mount must not become a way up in the sidecar). The tar is written to
// the file name rather than held in memory, and compressed at gzip's best
// speed: go-containerregistry compresses a layer once for its digest and
// again to write it.
func dirLayer(root, name string, at time.Time) (v1.Layer, error) {
	err := writeTar(name, root, func(rel, p string, d fs.DirEntry) (*tar.Header, error) {
		fi, err := d.Info()
		if err != nil {
			return nil, err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil, err
		}
		h.Name = rel
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Mode &^= 0o6000
		h.ModTime, h.AccessTime, h.ChangeTime, h.Format = at.UTC(), time.Time{}, time.Time{}, tar.FormatPAX
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("release: layer of %s: %w", root, err)
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(name) },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
}
