package portal

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
)

// TestResolveH264: h264=auto, the default, runs gst-launch-1.0 where its
// pipeline encodes here, and elsewhere gives tiles and logs why and what
// to install: no GStreamer at all, GStreamer without x264enc, and the
// distroless kube image, which the encoder sidecar serves instead. Off
// and empty are tiles; a program named outright is run as it is.
func TestResolveH264(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	resolve := func(t *testing.T, h264, backend string) (string, string) {
		t.Helper()
		var log bytes.Buffer
		m := &Main{Log: slog.New(slog.NewTextHandler(&log, nil))}
		m.Config.Console.H264, m.Config.Server.Backend = h264, backend
		return m.resolveH264(context.Background()), log.String()
	}
	for _, c := range []struct {
		name, h264, backend string
		setup               func(*testing.T)
		want                string
		logs                []string
	}{
		{name: "Auto", h264: "auto", want: "gst-launch-1.0", logs: []string{"H.264 on"}},
		{name: "AutoNoGStreamer", h264: "auto", setup: func(t *testing.T) { t.Setenv("PATH", t.TempDir()) },
			logs: []string{"H.264 off: this machine cannot encode it", "install gstreamer1.0-tools"}},
		{name: "AutoNoX264enc", h264: "auto", setup: withoutX264enc,
			logs: []string{"H.264 off: this machine cannot encode it", "install gstreamer1.0-plugins-ugly", "x264enc"}},
		{name: "AutoKubeImage", h264: "auto", backend: BackendKube, setup: func(t *testing.T) { t.Setenv("PATH", t.TempDir()) },
			logs: []string{"H.264 off: this image cannot encode it", "encoder.enabled=true"}},
		{name: "Off", h264: "off"},
		{name: "Empty", h264: ""},
		{name: "Program", h264: "/opt/gst/gst-launch-1.0", want: "/opt/gst/gst-launch-1.0"},
		{name: "Sidecar", h264: "unix:/run/corral-vdi-encoder/h264.sock", want: "unix:/run/corral-vdi-encoder/h264.sock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup(t)
			}
			got, log := resolve(t, c.h264, c.backend)
			if got != c.want {
				t.Errorf("h264=%q resolved to %q; want %q (log: %s)", c.h264, got, c.want, log)
			}
			for _, l := range c.logs {
				if !strings.Contains(log, l) {
					t.Errorf("h264=%q logged %q; want it to say %q", c.h264, log, l)
				}
			}
			if c.logs == nil && log != "" {
				t.Errorf("h264=%q logged %q; want nothing (nothing was looked for)", c.h264, log)
			}
		})
	}
}
