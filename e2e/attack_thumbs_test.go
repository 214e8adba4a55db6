package e2e

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

// TestAttack_HugeScreenshot: a guest sets a huge screen mode, so KubeVirt's
// vnc/screenshot of it is an 8192×8192 PNG (black, 67 Mpixels, 268 MiB
// once decoded as RGBA, a few hundred KiB on the wire). The portal
// refuses it from its header, before decoding a pixel, and takes the
// dashboard's picture over the guest's VNC instead (the desktop's colours,
// not the forged black); it stays up.
func TestAttack_HugeScreenshot(t *testing.T) {
	e := startKubeEnv(t)
	member := e.runningMember(t, "huge")
	var forged bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	must(t, enc.Encode(&forged, image.NewGray(image.Rect(0, 0, 8192, 8192))))
	e.standIn.ForgeScreenshot(e.ns, member, forged.Bytes())
	code, pic := e.portal.thumb(t, "ops", e.ns+"/"+member)
	if n := e.standIn.Screenshots(e.ns, member); n != 1 {
		t.Fatalf("the stand-in served %d screenshots; want the forged one asked for once", n)
	}
	if code != 200 {
		t.Fatalf("thumbnail after a huge screenshot: %d %q; want 200 from the VNC fallback", code, pic)
	}
	img, err := png.Decode(bytes.NewReader(pic))
	if err != nil || img.Bounds().Dx() != 320 {
		t.Fatalf("thumbnail: %v; want 320 wide", err)
	}
	if r, g, b, _ := img.At(2, 2).RGBA(); r|g|b == 0 {
		t.Errorf("thumbnail corner is black: the forged screenshot was decoded; want the desktop's own picture over VNC")
	}
	if code := e.portal.API(t, "", "GET", "/healthz", nil); code != 200 {
		t.Errorf("/healthz after the attack: %d; want 200", code)
	}
}
