package portal

import (
	"context"
	"errors"
	"os/exec"
	"time"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// The h264 setting's words; any other value is the encoder to run (a
// program, or unix:PATH of an encoder service).
const (
	// h264Auto, the default, encodes with gst-launch-1.0 where its
	// pipeline encodes on this machine, else sends tiles and says why.
	h264Auto = "auto"
	// h264Off sends tiles only, as an empty value does.
	h264Off = "off"
	// h264Program is the encoder auto looks for.
	h264Program = "gst-launch-1.0"
)

// h264CheckTimeout bounds auto's check at start (one 64×48 screen,
// milliseconds as a rule; a cold start on a loaded machine, seconds).
const h264CheckTimeout = 20 * time.Second

// resolveH264 returns the encoder the screen hubs run for the h264
// setting, "" for tiles only. Auto takes gst-launch-1.0 when one small
// screen encodes with its pipeline here, as a hub's would; where it does
// not (no GStreamer, a missing plugin, the distroless kube image), the
// consoles get tiles and the log says why and what to install (doctor
// says the same). An encoder named outright is run as it is: one that
// fails gives its desktops tiles, and doctor warns.
func (m *Main) resolveH264(ctx context.Context) string {
	switch program := m.Config.Console.H264; program {
	case "", h264Off:
		return ""
	case h264Auto:
	default:
		return program
	}
	ctx, cancel := context.WithTimeout(ctx, h264CheckTimeout)
	defer cancel()
	err := rfb.CheckH264(ctx, h264Program)
	if err == nil {
		m.Log.Info("H.264 on: gst-launch-1.0 encodes here; VNC consoles that can decode it get video while the screen moves", "h264", h264Auto)
		return h264Program
	}
	install := h264Missing(err)
	if m.Config.Server.Backend == BackendKube {
		m.Log.Info("H.264 off: this image cannot encode it, so VNC consoles get tiles; the portal's encoder sidecar can (helm: encoder.enabled=true; kustomize: deploy/overlays/h264), or set h264=off to say so", "h264", h264Auto, "lacks", install, "err", err)
	} else {
		m.Log.Info("H.264 off: this machine cannot encode it, so VNC consoles get tiles; install "+install+" (or run `sudo scripts/deps.sh`) and restart, or set h264=off to say so", "h264", h264Auto, "lacks", install, "err", err)
	}
	return ""
}

// h264Missing names the Debian packages that would make err, an encoder
// check's failure, pass: the one package of the part err names as
// missing, else all of them.
func h264Missing(err error) string {
	var exit *exec.Error
	switch m := gstNoElement.FindStringSubmatch(err.Error()); {
	case errors.As(err, &exit):
		return "gstreamer1.0-tools"
	case m != nil && gstElementPackages[m[1]] != "":
		return gstElementPackages[m[1]]
	}
	return h264Packages
}
