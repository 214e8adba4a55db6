package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// ChartDir is the Helm chart's folder under the deploy folder.
const ChartDir = "helm/corral-vdi-portal"

// Chart packages the Helm chart of c.Deploy as `helm package` would, as a
// chart of the release: its version the release's (without the v), its
// appVersion the release, and its values pulling image c.Image pinned to
// digest, as install.yaml does. With encoderDigest (the release has the
// encoder sidecar's image) its values turn the encoder on, pulling
// c.EncoderRepository (DefaultEncoderImage when empty) pinned to that
// digest. Every file carries c.Created, so one commit packs to the same
// bytes. It returns the .tgz's path in c.Out.
func Chart(c Config, digest, encoderDigest string) (string, error) {
	ch, err := loader.Load(filepath.Join(c.Deploy, ChartDir))
	if err != nil {
		return "", fmt.Errorf("release: chart: %w", err)
	}
	ch.Metadata.Version = strings.TrimPrefix(c.Version, "v")
	ch.Metadata.AppVersion = c.Version
	pinned := false
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		v, err := pinImages(string(f.Data), c, digest, encoderDigest)
		if err != nil {
			return "", err
		}
		f.Data, pinned = []byte(v), true
	}
	if !pinned {
		return "", fmt.Errorf("release: chart %s has no %s", ch.Name(), chartutil.ValuesfileName)
	}
	ch.StampModTimes(c.Created)
	path, err := chartutil.Save(ch, c.Out)
	if err != nil {
		return "", fmt.Errorf("release: package chart: %w", err)
	}
	return path, nil
}

// pinImages sets the image block of the chart's values.yaml (kept as
// written, comments and all) to c.Image and digest and, with
// encoderDigest, the encoder block to on, pulling c.EncoderRepository
// pinned to encoderDigest.
func pinImages(values string, c Config, digest, encoderDigest string) (string, error) {
	edits := []struct{ old, new string }{
		{"\n  repository: " + DefaultImage + "\n", "\n  repository: " + c.Image + "\n"},
		{"\n  digest: \"\"\n", "\n  digest: " + digest + "\n"},
	}
	if encoderDigest != "" {
		edits = append(edits, []struct{ old, new string }{
			{"\nencoder:\n  enabled: false\n", "\nencoder:\n  enabled: true\n"},
			{"\n    repository: " + DefaultEncoderImage + "\n", "\n    repository: " + c.encoderRepository() + "\n"},
			{"\n    digest: \"\"\n", "\n    digest: " + encoderDigest + "\n"},
		}...)
	}
	for _, r := range edits {
		if n := strings.Count(values, r.old); n != 1 {
			return "", fmt.Errorf("release: the chart's values.yaml has %d lines `%s`; want one (in its image or encoder block)", n, strings.ReplaceAll(strings.TrimSpace(r.old), "\n", " / "))
		}
		values = strings.Replace(values, r.old, r.new, 1)
	}
	return values, nil
}

// PushChart pushes the packaged chart to the OCI registry repo
// ("oci://host/path", as helm push takes it), tagged with its version,
// with the credentials helm registry login saved; plainHTTP is for a
// registry without TLS. It returns the reference pushed.
func PushChart(tgz, repo string, plainHTTP bool) (string, error) {
	host, ok := strings.CutPrefix(repo, "oci://")
	if !ok || host == "" {
		return "", fmt.Errorf("release: chart registry %q: want oci://HOST/PATH, e.g. oci://ghcr.io/corral-dev/charts", repo)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("release: read %s: %w", tgz, err)
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(os.Stderr)}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return "", fmt.Errorf("release: registry client: %w", err)
	}
	ref := fmt.Sprintf("%s/%s:%s", strings.TrimSuffix(host, "/"), ch.Name(), ch.Metadata.Version)
	if _, err := client.Push(data, ref, registry.PushOptCreationTime(ch.ModTime.UTC().Format("2006-01-02T15:04:05Z"))); err != nil {
		return "", fmt.Errorf("release: push %s: %w", ref, err)
	}
	return ref, nil
}
