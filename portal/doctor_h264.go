package portal

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// gstElementPackages are the Debian packages of the GStreamer elements
// the screen hubs' H.264 pipeline uses (rfb/h264_encoder.go).
var gstElementPackages = map[string]string{
	"fdsrc":         "libgstreamer1.0-0",
	"fdsink":        "libgstreamer1.0-0",
	"rawvideoparse": "gstreamer1.0-plugins-base",
	"videoconvert":  "gstreamer1.0-plugins-base",
	"multipartmux":  "gstreamer1.0-plugins-good",
	"x264enc":       "gstreamer1.0-plugins-ugly",
}

// gstNoElement is how gst-launch-1.0 names an element it lacks.
var gstNoElement = regexp.MustCompile(`no element "([^"]+)"`)

// h264Packages is everything the pipeline needs, for a fix that cannot
// name the one missing.
const h264Packages = "gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly"

// checkH264 runs the H.264 encoder CORRAL_VDI_H264 names on one small
// screen, as a screen hub would, and says what to install when it cannot.
// A portal whose encoder fails still works: its consoles get tiles. Auto
// (the default) is gst-launch-1.0 where it encodes and tiles where it
// does not, which is no fault: the finding says why and how to turn it
// on. On the kube backend doctor runs in the portal's container (kubectl
// exec), whose image, distroless, has no GStreamer: there the encoders
// run in the Pod's encoder sidecar, which CORRAL_VDI_H264=unix:PATH
// reaches.
func checkH264(ctx context.Context, fs *findings, cfg Config) {
	program := cfg.Console.H264
	kube := cfg.Server.Backend == BackendKube
	off := program == "" || program == h264Off
	if off && !kube {
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264=%s): VNC consoles get tiles", program)
		return
	}
	probe := program
	if off || program == h264Auto {
		probe = h264Program
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := rfb.CheckH264(ctx, probe)
	install := h264Packages
	if err != nil {
		install = h264Missing(err)
	}
	switch {
	case program == h264Auto && err == nil:
		fs.ok("h264", "H.264 on (CORRAL_VDI_H264=auto): gst-launch-1.0 encodes H.264 here: VNC consoles that can decode it get video while the screen moves")
	case program == h264Auto && kube:
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264=auto): this image cannot encode it (it lacks %s: %v), so VNC consoles get tiles; the portal's encoder sidecar can (helm: encoder.enabled=true; kustomize: deploy/overlays/h264)", install, err)
	case program == h264Auto:
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264=auto): this machine cannot encode it (it lacks %s: %v), so VNC consoles get tiles; apt-get install %s (or `sudo scripts/deps.sh`) and a restart turn it on, CORRAL_VDI_H264=off says tiles are meant", install, err, install)
	case off && err == nil:
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264=%s): VNC consoles get tiles; this image could encode it (CORRAL_VDI_H264=auto)", program)
	case off:
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264=%s): VNC consoles get tiles; this image cannot encode it (it lacks %s: %v); the portal's encoder sidecar can (helm: encoder.enabled=true; kustomize: deploy/overlays/h264)", program, install, err)
	case err == nil && strings.HasPrefix(program, "unix:"):
		fs.ok("h264", "the encoder service at %s encodes H.264: VNC consoles that can decode it get video while the screen moves", strings.TrimPrefix(program, "unix:"))
	case strings.HasPrefix(program, "unix:"):
		fs.warn("h264", "Check the portal Pod's encoder container (kubectl logs -c encoder): it serves the socket CORRAL_VDI_H264 names, in the volume the two containers share",
			"the encoder service at %s does not encode, so every console gets tiles: %v", strings.TrimPrefix(program, "unix:"), err)
	case err == nil:
		fs.ok("h264", "%s encodes H.264 (x264enc): VNC consoles that can decode it get video while the screen moves", program)
	case kube:
		fs.warn("h264", "Turn on the portal's encoder sidecar (helm: encoder.enabled=true; kustomize: deploy/overlays/h264), which sets CORRAL_VDI_H264=unix:/run/corral-vdi-encoder/h264.sock; the kube image is distroless and has no GStreamer",
			"CORRAL_VDI_H264=%s cannot encode in this image (it lacks %s), so every console gets tiles: %v", program, install, err)
	default:
		fs.warn("h264", "apt-get install "+install+" (or `sudo scripts/deps.sh`), or set CORRAL_VDI_H264=auto (tiles where it cannot encode)",
			"CORRAL_VDI_H264=%s cannot encode, so every console gets tiles: %v", program, err)
	}
}
