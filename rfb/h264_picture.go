package rfb

// The Picture choice reaches the hub as Tight's compression level, the
// one knob a viewer has that the hub does not otherwise use (its zlib
// level is its own; the desktop never sees the viewer's). noVNC sends 2
// unless told otherwise, TigerVNC's viewer 2 as well: both are Auto.
const (
	encCompressLevel0 int32 = -256
	encCompressLevel9 int32 = -247
)

// videoMode is a viewer's Picture choice as the hub reads it.
type videoMode int

const (
	// videoAuto (compression 2–6, or none named): video while a large
	// part of the screen changes fast (the motion rule, h264_hub.go),
	// tiles for typing and other small changes.
	videoAuto videoMode = iota
	// videoSharp (compression 0–1): tiles only, never video.
	videoSharp
	// videoFast (compression 7–9): every change as video, the screen
	// painted again losslessly once it is still.
	videoFast
)

// modeOf reads a compression level (0–9) as a Picture choice.
func modeOf(level int) videoMode {
	switch {
	case level <= 1:
		return videoSharp
	case level >= 7:
		return videoFast
	}
	return videoAuto
}

// videoOn reports whether changes go to c as video now, if it is in the
// stream: with Fast, from a change until the screen is still for
// videoSettle; with Auto, while the screen moves; hub.mu is held.
func (h *Hub) videoOn(c *client) bool {
	if !h.wantsVideo(c) {
		return false
	}
	if c.enc.video == videoFast {
		return h.vid.live
	}
	return h.vid.active
}

// repaintSettled paints the whole screen again, losslessly, for every
// viewer that was sent video since its last such repaint and whose video
// is off now (a frame covers the whole screen, lossy even where nothing
// moved); hub.mu is held.
func (h *Hub) repaintSettled() {
	for c := range h.clients {
		if c.lossy && !h.videoOn(c) {
			c.lossy = false
			c.addDamage(Rect{0, 0, h.fb.w, h.fb.h})
		}
	}
}
