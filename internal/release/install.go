package release

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// baseImage is the image name deploy/'s Deployment uses, which install.yaml
// replaces by image@digest.
const baseImage = "ghcr.io/corral-dev/corral-vdi-portal-kube"

// h264Overlay is the kustomize overlay (under the deploy folder) that adds
// the encoder sidecar to the base; its image is DefaultEncoderImage.
const h264Overlay = "overlays/h264"

// Install renders the kustomize base in c.Deploy, as `kubectl kustomize`
// would, with the portal's image pinned to c.Image@digest. With
// encoderDigest (the release has the encoder sidecar's image) it renders
// the base with the sidecar (overlays/h264) instead, its image pinned to
// c.EncoderRepository@encoderDigest.
func Install(c Config, digest, encoderDigest string) ([]byte, error) {
	abs, err := filepath.Abs(c.Deploy)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	// A throwaway overlay beside the base (kustomize takes only relative
	// paths): the base is left as it is, and the pin is kustomize's own
	// images transformer.
	tmp, err := os.MkdirTemp(filepath.Dir(abs), ".release-")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(tmp)
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"../" + filepath.Base(abs)},
		Images:    []types.Image{{Name: baseImage, NewName: c.Image, Digest: digest}},
	}
	pins := c.Image + "@" + digest
	if encoderDigest != "" {
		repo := c.encoderRepository()
		k.Resources = []string{"../" + filepath.Base(abs) + "/" + h264Overlay}
		k.Images = append(k.Images, types.Image{Name: DefaultEncoderImage, NewName: repo, Digest: encoderDigest})
		pins += "\n# and its H.264 encoder sidecar's: " + repo + "@" + encoderDigest
	}
	body, err := yaml.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), body, 0o644); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), tmp)
	if err != nil {
		return nil, fmt.Errorf("release: kustomize build %s: %w", c.Deploy, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	header := fmt.Sprintf("# corral-vdi-portal install manifest, rendered from deploy/ with the image\n# pinned by digest: %s\n# kubectl apply --server-side -f install.yaml (see docs/operating.md)\n", pins)
	return append([]byte(header), out...), nil
}
