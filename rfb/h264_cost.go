package rfb

import "time"

// The Picture choice reaches the hub as Tight's compression level (the
// only knob a viewer has), which the hub does not otherwise use: its zlib
// level is its own. Low levels ask for the least work and the exact
// picture, high ones for the fewest bytes.
const (
	encCompressLevel0 int32 = -256
	encCompressLevel9 int32 = -247
)

// videoMode is a viewer's Picture choice as the hub reads it.
type videoMode int

const (
	// videoAuto (compression 2–6, and a viewer that names no level):
	// video while the tiles for a run of changes would cost clearly more.
	videoAuto videoMode = iota
	// videoSharp (compression 0–1): lossless tiles only, never video.
	videoSharp
	// videoFast (compression 7–9): each change the cheaper way in bytes.
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

// Auto's margins: a change counts for video when its tiles would cost
// more than autoMargin video frames (video is lossy, and each run of it
// ends with the screen sent again losslessly), and video starts after
// autoEnter such changes in a row. Fast counts a change for video as soon
// as its tiles cost more than one frame, and starts at the first.
const (
	autoMargin = 2
	autoEnter  = 2
)

// frameBudget is the bytes a frame may take at the encoder's bitrate and
// 30 fps: what a video frame is reckoned to cost before the hub has seen
// any (on a small screen, at most two bits a pixel: its frames are far
// under the budget).
const frameBudget = h264Bitrate * 1000 / 8 / 30

// motion is one viewer's run of changes that would cost more as tiles
// than as video, and whether its changes go as video now. Hub.mu guards it.
type motion struct {
	run        int       // such changes in a row
	lastCostly time.Time // when the last one came
	active     bool      // changes go to the viewer as video
}

// step counts a change made at now whose tiles would cost tiles bytes,
// against a video frame reckoned at frame bytes, by mode's rule, and
// reports whether the change goes as video and whether the viewer's
// video just ended (no costly change for videoSettle): it then needs
// the screen again losslessly. The rule weighs bytes, not how many
// changes fall in a span of time, so a page that scrolls goes the same
// way on a busy machine as on a quiet one.
func (m *motion) step(mode videoMode, tiles, frame int, now time.Time) (video, ended bool) {
	if mode == videoSharp {
		ended = m.active
		*m = motion{}
		return false, ended
	}
	margin, enter := autoMargin, autoEnter
	if mode == videoFast {
		margin, enter = 1, 1
	}
	quiet := now.Sub(m.lastCostly) >= videoSettle
	if m.active && quiet {
		m.active, m.run, ended = false, 0, true
	}
	switch {
	case tiles > margin*frame:
		if quiet {
			m.run = 0
		}
		m.run++
		m.lastCostly = now
	case !m.active:
		m.run = 0 // a cheap change breaks the run
	}
	if !m.active && m.run >= enter {
		m.active = true
	}
	return m.active, ended
}

// tileCosts returns, for each JPEG level (clientEncodings.jpeg) of the
// viewers that may get r as video, what r would cost them as tiles: the
// hub's own Tight encoder run on r (its probe, the reader's own). A
// change too small to cost a video frame even raw is not encoded (its
// cost is its raw size). Nil when no viewer may get video.
func (h *Hub) tileCosts(r Rect) map[int]int {
	h.mu.Lock()
	var levels map[int]int
	for c := range h.clients {
		if h.wantsVideo(c) {
			if levels == nil {
				levels = map[int]int{}
			}
			levels[c.enc.jpeg] = r.W * r.H * 4
		}
	}
	r = r.clip(h.fb.w, h.fb.h)
	if levels == nil || r.empty() || r.W*r.H*4 <= h.frameCost() {
		h.mu.Unlock()
		return levels
	}
	h.probePix = h.fb.get(r, scratch(h.probePix, r.W*r.H*4))
	h.mu.Unlock()
	for level := range levels {
		levels[level] = h.probe.tileCost(h.probePix, r, level)
	}
	h.probePix = keep(h.probePix)
	return levels
}

// tileCost returns the bytes of pix, the screen's rectangle r, as the
// hub's update to a viewer like noVNC (Tight first, with JPEG level jpeg
// as clientEncodings says it), encoded by p's own encoders.
func (p *client) tileCost(pix []byte, r Rect, jpeg int) int {
	u := &update{rects: []Rect{r}, pix: [][]byte{pix}, raw: len(pix), pf: canonical,
		enc: clientEncodings{tight: true, tightFirst: true, zrle: true, lastRect: true, jpeg: jpeg}}
	msg := u.encode(p)
	p.msg = keep(msg)
	return len(msg)
}

// noteFrame counts a delivered access unit into what a video frame is
// reckoned to cost (key frames, made for viewers that join, not); hub.mu
// is held.
func (h *Hub) noteFrame(au accessUnit) {
	if !au.key {
		h.vid.frameBytes = h.frameCost() + (len(au.data)-h.frameCost())/8
	}
}

// frameCost is what a video frame is reckoned to cost: the running mean
// of the frames sent, frameBudget before any; hub.mu is held.
func (h *Hub) frameCost() int {
	if h.vid.frameBytes == 0 {
		return max(1, min(frameBudget, h.fb.w*h.fb.h/4))
	}
	return h.vid.frameBytes
}
