package e2e

import (
	"os/exec"
	"testing"
)

// wanVideo is the video the WAN bench plays in the desktop, as a shell
// command: GStreamer's goom (a music visualiser, of gst-plugins-good)
// makes moving pictures, smooth and textured, that change over the whole
// frame and never repeat, at 60 frames a second (the path's own rate
// shows, not the video's: a 30-a-second video would cap every row at
// 30); drawn at 640×360 (goom's own cost at 1280×720 is a core) and
// scaled to 1280×720, which with openbox's title bar is the bench's
// whole 1280×743 screen; ximagesink (gstreamer1.0-x) shows it in a window
// as a player would. Its sound goes nowhere: goom only reads it.
const wanVideo = "gst-launch-1.0 -q audiotestsrc wave=pink-noise is-live=true ! goom ! " +
	"video/x-raw,width=640,height=360,framerate=60/1 ! videoscale ! video/x-raw,width=1280,height=720 ! " +
	"videoconvert ! ximagesink"

// wanVideoTitle is the name ximagesink gives wanVideo's window (the
// program's).
const wanVideoTitle = "gst-launch-1.0"

// mustVideoPlayer fails t, saying what to install, unless wanVideo's
// GStreamer elements are here (the desktop runs the host's programs).
func mustVideoPlayer(t *testing.T) {
	t.Helper()
	for _, el := range []string{"goom", "ximagesink", "videoscale"} {
		if exec.Command("gst-inspect-1.0", "--exists", el).Run() != nil {
			t.Fatalf("the bench's video workload plays a video with GStreamer's %s, which is not installed here: scripts/deps.sh --test installs it (gstreamer1.0-x, -plugins-good, -plugins-base)", el)
		}
	}
}
