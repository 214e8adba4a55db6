package release

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// WriteSBOM writes a CycloneDX JSON SBOM of the modules linked into
// c.Binary, as its debug/buildinfo records them (path, version, go.sum
// hash; replacements as their targets), plus the Go standard library;
// with c.EncoderRoot, also the encoder sidecar's image (a container
// component) and the Debian packages it is made of, on which it depends
// (encoderSBOM).
func WriteSBOM(out string, c Config) error {
	info, err := buildinfo.ReadFile(c.Binary)
	if err != nil {
		return fmt.Errorf("release: SBOM: read build info of %s: %w", c.Binary, err)
	}
	main := cdx.Component{
		BOMRef: purl(info.Main.Path, c.Version), Type: cdx.ComponentTypeApplication,
		Name: "corral-vdi-portal", Version: c.Version, PackageURL: purl(info.Main.Path, c.Version),
		ExternalReferences: &[]cdx.ExternalReference{{Type: cdx.ERTypeVCS, URL: Source}},
		Properties:         &[]cdx.Property{{Name: "vcs.revision", Value: c.Commit}},
	}
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	std := cdx.Component{BOMRef: purl("stdlib", goVersion), Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: goVersion, PackageURL: purl("stdlib", goVersion)}
	comps := []cdx.Component{std}
	deps := []string{std.BOMRef}
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		comp := cdx.Component{BOMRef: purl(m.Path, m.Version), Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl(m.Path, m.Version)}
		if m.Sum != "" {
			comp.Properties = &[]cdx.Property{{Name: "go.sum", Value: m.Sum}}
		}
		comps = append(comps, comp)
		deps = append(deps, comp.BOMRef)
	}
	dependencies := []cdx.Dependency{{Ref: main.BOMRef, Dependencies: &deps}}
	if c.EncoderRoot != "" {
		image, debs, err := encoderSBOM(c.EncoderRoot, c.Version)
		if err != nil {
			return err
		}
		var refs []string
		for _, d := range debs {
			refs = append(refs, d.BOMRef)
		}
		comps = append(append(comps, image), debs...)
		dependencies = append(dependencies, cdx.Dependency{Ref: image.BOMRef, Dependencies: &refs})
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: c.Created.UTC().Format("2006-01-02T15:04:05Z"),
		Component: &main,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "corral-vdi-portal internal/release",
			Version: c.Version}}},
	}
	bom.Components = &comps
	bom.Dependencies = &dependencies
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("release: SBOM: %w", err)
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		f.Close()
		return fmt.Errorf("release: SBOM: %w", err)
	}
	return f.Close()
}

// purl is a Go module's package URL (pkg:golang/path@version).
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}
