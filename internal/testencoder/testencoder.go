// Package testencoder runs the H.264 encoder service (rfb.ServeEncoders)
// for tests, as the encoder sidecar of the portal's Pod runs it.
package testencoder

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// Start serves H.264 encoders on a Unix socket until tb ends and returns
// the portal's CORRAL_VDI_H264 for it, "unix:PATH", or "" where this
// machine has no GStreamer x264enc (scripts/deps.sh installs it). The
// service runs gst-launch-1.0 by its full path, so a test may empty PATH
// afterwards (a portal's image without GStreamer).
func Start(tb testing.TB) string {
	tb.Helper()
	gst, err := exec.LookPath("gst-launch-1.0")
	if err != nil || exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run() != nil {
		return ""
	}
	path := filepath.Join(tb.TempDir(), "h264.sock")
	ln, err := rfb.ListenEncoders(path)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rfb.ServeEncoders(ctx, ln, rfb.EncoderServiceConfig{Program: gst}) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("the encoder service: %v", err)
		}
	})
	return "unix:" + path
}
