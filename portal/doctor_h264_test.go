package portal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testencoder"
)

// TestDoctor_H264: doctor runs the H.264 encoder CORRAL_VDI_H264 names
// through the hubs' real pipeline and, when it cannot encode, names the
// package to install: GStreamer's tools for a missing program, the
// plugins package of a missing element (x264enc taken out of a copy of
// this machine's plugin folder); on the kube backend, whether the image
// can encode even with H.264 off, and the encoder sidecar's service.
func TestDoctor_H264(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	check := func(t *testing.T, program string, backend ...string) finding {
		t.Helper()
		var cfg Config
		cfg.Console.H264 = program
		if len(backend) > 0 {
			cfg.Server.Backend = backend[0]
		}
		var fs findings
		checkH264(context.Background(), &fs, cfg)
		got := fs.find("h264")
		if len(got) != 1 {
			t.Fatalf("findings %+v; want one h264 finding", fs)
		}
		return got[0]
	}
	t.Run("Off", func(t *testing.T) {
		if f := check(t, ""); f.Level != levelOK || !strings.Contains(f.What, "tiles") {
			t.Errorf("H.264 off: %+v; want ok, tiles", f)
		}
	})
	t.Run("AutoEncodes", func(t *testing.T) {
		if f := check(t, "auto"); f.Level != levelOK || !strings.Contains(f.What, "H.264 on (CORRAL_VDI_H264=auto)") {
			t.Errorf("auto with x264enc: %+v; want ok, on", f)
		}
	})
	t.Run("AutoNoX264enc", func(t *testing.T) {
		withoutX264enc(t)
		if f := check(t, "auto"); f.Level != levelOK || !strings.Contains(f.What, "H.264 off (CORRAL_VDI_H264=auto)") || !strings.Contains(f.What, "apt-get install gstreamer1.0-plugins-ugly") {
			t.Errorf("auto without x264enc: %+v; want ok (tiles are no fault), off, naming gstreamer1.0-plugins-ugly", f)
		}
	})
	t.Run("Encodes", func(t *testing.T) {
		if f := check(t, "gst-launch-1.0"); f.Level != levelOK || !strings.Contains(f.What, "encodes H.264") {
			t.Errorf("gst-launch-1.0 with x264enc: %+v; want ok", f)
		}
	})
	t.Run("NoProgram", func(t *testing.T) {
		if f := check(t, "/nonexistent/gst-launch-1.0"); f.Level != levelWarn || !strings.Contains(f.Fix, "apt-get install gstreamer1.0-tools ") {
			t.Errorf("a missing program: %+v; want a warning naming gstreamer1.0-tools", f)
		}
	})
	// On the kube backend doctor runs in the portal's image: it says
	// whether the image can encode, and a fix that fits a distroless one
	// (no apt-get there). An image without GStreamer is this machine with
	// an empty PATH.
	t.Run("KubeOffCould", func(t *testing.T) {
		if f := check(t, "", BackendKube); f.Level != levelOK || !strings.Contains(f.What, "could encode") {
			t.Errorf("kube, H.264 off, GStreamer here: %+v; want ok, could encode", f)
		}
	})
	t.Run("KubeOffCannot", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		if f := check(t, "", BackendKube); f.Level != levelOK || !strings.Contains(f.What, "cannot encode it (it lacks gstreamer1.0-tools") {
			t.Errorf("kube, H.264 off, no GStreamer: %+v; want ok, cannot encode, lacking gstreamer1.0-tools", f)
		}
	})
	t.Run("KubeNoProgram", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		f := check(t, "gst-launch-1.0", BackendKube)
		if f.Level != levelWarn || !strings.Contains(f.Fix, "distroless") || !strings.Contains(f.Fix, "encoder.enabled=true") || strings.Contains(f.Fix, "apt-get") {
			t.Errorf("kube, H.264 on, no GStreamer: %+v; want a warning naming the encoder sidecar", f)
		}
	})
	// The encoder sidecar's service, reached on its socket.
	t.Run("KubeSidecar", func(t *testing.T) {
		service := testencoder.Start(t)
		t.Setenv("PATH", t.TempDir()) // the portal's own image has none
		if f := check(t, service, BackendKube); f.Level != levelOK || !strings.Contains(f.What, "encoder service at "+strings.TrimPrefix(service, "unix:")+" encodes") {
			t.Errorf("kube, the encoder sidecar: %+v; want ok, the service encodes", f)
		}
	})
	t.Run("KubeSidecarGone", func(t *testing.T) {
		f := check(t, "unix:"+filepath.Join(t.TempDir(), "none.sock"), BackendKube)
		if f.Level != levelWarn || !strings.Contains(f.Fix, "kubectl logs -c encoder") {
			t.Errorf("kube, no encoder service on the socket: %+v; want a warning pointing at the encoder container", f)
		}
	})
	t.Run("NoX264enc", func(t *testing.T) {
		withoutX264enc(t)
		f := check(t, "gst-launch-1.0")
		if f.Level != levelWarn || !strings.Contains(f.Fix, "apt-get install gstreamer1.0-plugins-ugly ") || !strings.Contains(f.What, "x264enc") {
			t.Errorf("no x264enc: %+v; want a warning naming x264enc and gstreamer1.0-plugins-ugly", f)
		}
	})
}

// withoutX264enc makes GStreamer, for the rest of t, this machine's
// without x264enc: its plugin folder copied (linked) without x264enc's.
func withoutX264enc(t *testing.T) {
	dir := gstPluginDir(t)
	plugins := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "libgstx264.so" {
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(plugins, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("GST_PLUGIN_SYSTEM_PATH_1_0", plugins)
	t.Setenv("GST_PLUGIN_PATH_1_0", "")
	t.Setenv("GST_REGISTRY_1_0", filepath.Join(t.TempDir(), "registry.bin"))
}

// gstPluginDir returns the folder of this machine's GStreamer plugins
// (the one holding x264enc's).
func gstPluginDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("gst-inspect-1.0", "x264enc").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Filename"); ok {
			return filepath.Dir(strings.TrimSpace(v))
		}
	}
	t.Fatalf("gst-inspect-1.0 x264enc names no file:\n%s", out)
	return ""
}
