package release

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's non-root user, distroless's "nonroot", which deploy/'s
// securityContext names.
const (
	UID        = 65532
	User       = "65532:65532"
	Entrypoint = "/usr/local/bin/corral-vdi-portal"
)

// passwd and group give uid 65532 a name (Go's os/user and tools in a
// debug container read them) and root none but its own.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// Image builds the kube image: one layer on an empty base with the static
// binary, CA certificates, /etc/passwd and /etc/group for the non-root
// user and the folders deploy/ mounts over, with OCI labels.
func Image(c Config) (v1.Image, error) {
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("release: the binary: %w (build it with scripts/build-binary.sh)", err)
	}
	certs, err := os.ReadFile(c.CACerts)
	if err != nil {
		return nil, fmt.Errorf("release: CA certificates: %w (install Debian's ca-certificates)", err)
	}
	layer, err := rootfs(c.Created, append(ownFiles(bin),
		file{name: "etc/ssl/", mode: 0o755},
		file{name: "etc/ssl/certs/", mode: 0o755},
		file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		file{name: "var/", mode: 0o755},
		file{name: "var/lib/", mode: 0o755},
		file{name: "var/lib/corral-vdi/", mode: 0o700, owner: UID},
	))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("release: image: %w", err)
	}
	return configure(img, c, "corral-vdi-portal-kube", "corral-vdi-portal on the Kubernetes backend", v1.Config{
		User:         User,
		Entrypoint:   []string{Entrypoint},
		Cmd:          []string{"serve"},
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin", "CORRAL_VDI_BACKEND=kube", "CORRAL_VDI_LISTEN=0.0.0.0:8080", "CORRAL_VDI_DATA_DIR=/var/lib/corral-vdi"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
	})
}

// configure gives img its config (cfg, for this machine's architecture,
// created at c.Created) and the OCI labels, on the config and as the
// manifest's annotations: title, description, c's version and commit,
// the source and the creation time.
func configure(img v1.Image, c Config, title, description string, cfg v1.Config) (v1.Image, error) {
	labels := map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.version":     c.Version,
		"org.opencontainers.image.revision":    c.Commit,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.created":     c.Created.UTC().Format(time.RFC3339),
	}
	cfg.Labels = labels
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: c.Created.UTC()},
		RootFS:       mustRootFS(img),
		Config:       cfg,
	})
	if err != nil {
		return nil, fmt.Errorf("release: %s config: %w", title, err)
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// mustRootFS is img's layer list, which mutate.ConfigFile would otherwise
// drop with the config it replaces.
func mustRootFS(img v1.Image) v1.RootFS {
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.RootFS{Type: "layers"}
	}
	return cf.RootFS
}

// file is one entry of the image's root file system; a name ending in /
// is a folder.
type file struct {
	name  string
	mode  int64
	owner int
	data  []byte
}

// ownFiles are what both images hold of their own: the static binary,
// /etc/passwd and /etc/group for the non-root user, its home and /tmp.
func ownFiles(bin []byte) []file {
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, owner: UID},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: "usr/local/bin/corral-vdi-portal", mode: 0o755, data: bin},
	}
}

// rootfs is a layer of files, in their names' order with a fixed time,
// so that one binary always makes one digest.
func rootfs(at time.Time, files []file) (v1.Layer, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: at.UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if path.Clean(f.name) != f.name {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("release: layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("release: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("release: layer: %w", err)
	}
	raw := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}
