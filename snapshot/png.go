package snapshot

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/png"
)

// FromPNG decodes a PNG screenshot a desktop's platform took (KubeVirt's
// vnc/screenshot) and returns it scaled to at most width pixels wide. The
// picture's size comes from the guest, so it is bounded like an RFB
// framebuffer before any pixel is decoded: a guest that sets a huge mode
// gets a refusal, not a 256 MiB thumbnail.
func FromPNG(b []byte, width int) (*image.RGBA, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("snapshot: the screenshot is not a PNG: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > maxFrame || cfg.Height > maxFrame || cfg.Width*cfg.Height > maxPixels {
		return nil, fmt.Errorf("snapshot: the screenshot is %dx%d, more than a %dx%d screen", cfg.Width, cfg.Height, 4096, 2304)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("snapshot: decode the screenshot: %w", err)
	}
	rgba, ok := img.(*image.RGBA)
	if !ok || rgba.Bounds().Min != (image.Point{}) {
		rgba = image.NewRGBA(image.Rect(0, 0, cfg.Width, cfg.Height))
		draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	}
	return Scale(rgba, width), nil
}
