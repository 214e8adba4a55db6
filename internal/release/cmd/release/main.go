// Command release writes a release of corral-vdi-portal into dist/; it is
// what `make release VERSION=vX.Y.Z` (scripts/release.sh) runs after
// building the static binary.
//
//	go run ./internal/release/cmd/release -version v0.3.0 -commit $(git rev-parse HEAD) -binary dist/corral-vdi-portal
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/release"
)

func main() {
	var c release.Config
	created := flag.Int64("created", 0, "image creation time, Unix seconds (the commit's: git log -1 --format=%ct)")
	flag.StringVar(&c.Binary, "binary", "dist/corral-vdi-portal", "the static binary (scripts/build-binary.sh)")
	flag.StringVar(&c.Version, "version", "", "the release, vX.Y.Z")
	flag.StringVar(&c.Commit, "commit", "", "the git revision built")
	flag.StringVar(&c.Deploy, "deploy", "deploy", "the kustomize base rendered into install.yaml")
	flag.StringVar(&c.Image, "image", release.DefaultImage, "the repository install.yaml pulls the image from")
	flag.StringVar(&c.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle the image carries")
	flag.StringVar(&c.Out, "out", "dist", "where the files go")
	flag.StringVar(&c.EncoderRoot, "encoder-root", "", "the encoder sidecar image's Debian root file system (scripts/encoder-rootfs.sh's rootfs/); empty: no encoder image")
	flag.StringVar(&c.EncoderRepository, "encoder-image", release.DefaultEncoderImage, "the repository install.yaml and the chart pull the encoder image from")
	chartRepo := flag.String("chart-registry", "", "push the chart to this OCI registry (oci://HOST/PATH), as helm push would; empty: not pushed")
	plainHTTP := flag.Bool("chart-plain-http", false, "the chart registry speaks HTTP, not HTTPS")
	flag.Parse()
	c.Created = time.Unix(*created, 0)
	if c.Commit == "" {
		fmt.Fprintln(os.Stderr, "release: -commit is required (git rev-parse HEAD)")
		os.Exit(2)
	}
	f, err := release.Build(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range []string{f.Image, f.Install, f.Chart, f.SBOM, f.EncoderImage, f.Sums} {
		if p != "" {
			fmt.Println(p)
		}
	}
	fmt.Println("image digest:", f.Digest)
	if f.EncoderDigest != "" {
		fmt.Println("encoder image digest:", f.EncoderDigest)
	}
	if *chartRepo != "" {
		ref, err := release.PushChart(f.Chart, *chartRepo, *plainHTTP)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("chart pushed: oci://" + ref)
	}
}
