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

// Install renders the kustomize base in dir, as `kubectl kustomize` would,
// with the portal's image pinned to image@digest.
func Install(dir, image, digest string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
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
		Images:    []types.Image{{Name: baseImage, NewName: image, Digest: digest}},
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
		return nil, fmt.Errorf("release: kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	header := fmt.Sprintf("# corral-vdi-portal install manifest, rendered from deploy/ with the image\n# pinned by digest: %s@%s\n# kubectl apply --server-side -f install.yaml (see docs/operating.md)\n", image, digest)
	return append([]byte(header), out...), nil
}
