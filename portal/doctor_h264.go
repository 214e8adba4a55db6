package portal

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
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
// A portal whose encoder fails still works: its consoles get tiles.
func checkH264(ctx context.Context, fs *findings, cfg Config) {
	program := cfg.Console.H264
	if program == "" {
		fs.ok("h264", "H.264 off (CORRAL_VDI_H264 empty): VNC consoles get tiles")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := rfb.CheckH264(ctx, program)
	if err == nil {
		fs.ok("h264", "%s encodes H.264 (x264enc): VNC consoles that can decode it get video while the screen moves", program)
		return
	}
	install := h264Packages
	var exit *exec.Error
	switch m := gstNoElement.FindStringSubmatch(err.Error()); {
	case errors.As(err, &exit):
		install = "gstreamer1.0-tools"
	case m != nil && gstElementPackages[m[1]] != "":
		install = gstElementPackages[m[1]]
	}
	fs.warn("h264", "apt-get install "+install+" (or `sudo scripts/deps.sh`), or leave CORRAL_VDI_H264 empty",
		"CORRAL_VDI_H264=%s cannot encode, so every console gets tiles: %v", program, err)
}
