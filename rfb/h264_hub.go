package rfb

import (
	"context"
	"time"
)

// Pace and bounds of a hub's H.264 stream.
const (
	// videoFrame is the shortest time between two encoded screens (60
	// fps) for viewers that take each frame before the next is made: the
	// next waits until one of them took the last (videoReady), so the
	// stream goes at the pace of its fastest viewer.
	videoFrame = time.Second / 60
	// sinkFrame is that time while a sink takes the stream (a WebRTC
	// track, another replica's viewers), which cannot say its pace: a
	// sink takes every frame, so the stream keeps to 30 a second for it
	// (the encoder told so: h264Bitrate a second either way).
	sinkFrame = time.Second / 30
	// videoSettle is how long after the screen's last change, or after
	// the last window in which much of it changed, the motion ends and
	// the viewers get the screen again losslessly.
	videoSettle = 500 * time.Millisecond
	// videoKeyEvery is the shortest time between two key frames made for
	// viewers that join or fell behind (a new encoder each).
	videoKeyEvery = time.Second
	// maxVideoQueued bounds the access units waiting for a viewer that
	// has not asked for them; past it, it leaves the stream and gets tiles
	// until it joins again at a key frame.
	maxVideoQueued = 4 << 20
	// motionWindow, videoArea and videoEnter say when changes go as
	// video: once at least 1/videoArea of the screen changed in each of
	// videoEnter windows in a row (a page scrolling, a video, a window
	// dragged), until no window did for videoSettle. Typing and other
	// small changes go as tiles, exact and smaller.
	motionWindow = 250 * time.Millisecond
	videoArea    = 4
	videoEnter   = 2
)

// video is a hub's one H.264 stream, encoded once for every viewer that
// asked for encoding 50 (h264.go), used as each viewer's Picture choice
// says (h264_picture.go): for Auto while a large part of the screen
// changes fast (moving), for Fast at every change. A screen is encoded
// only after the desktop changed it, once a viewer took the last frame
// (videoReady), at most videoFrame apart (sinkFrame with a sink); each
// access unit goes to every viewer in the stream whose video is on, a
// viewer joins at a key frame (one is made for it, at most one a
// videoKeyEvery) and gets tiles until then, and when its video ends
// (calm, or the screen still) the whole screen goes to it again as
// tiles, so that text ends pixel-exact: a frame covers the whole screen,
// lossy even where nothing moved. The motion ends by the screen's changes alone (a timer
// of its own, not the encoder's pace): an encode still under way, slow
// or stuck, never holds the still screen back from a viewer whose
// changes the stream took over. Between bursts a viewer stays in the
// stream (its decoder holds the encoder's last frame, so the next burst
// needs no key frame) and gets the changes as tiles. Hub.mu guards it.
type video struct {
	program string // the encoder's program (Hubs.H264); "" is off
	running bool   // runVideo runs
	kick    chan struct{}
	needKey bool // a viewer waits for a key frame
	off     bool // the encoder failed: tiles for everyone
	// The motion rule's state: whether changes go as video to Auto's
	// viewers, the current window's start and changed area, how many
	// busy windows in a row came before it, and when the last one ended.
	active             bool
	windowAt, lastBusy time.Time
	area, busy         int
	// live: a change went as video (to any viewer) since the screen was
	// last still; due: one waits to be encoded. changed is when the last
	// such change came; settle ends the video videoSettle after it
	// (settleVideo).
	live, due bool
	changed   time.Time
	settle    *time.Timer
	// maxQueued, if set, replaces maxVideoQueued (a test's smaller bound).
	maxQueued int
	// start, if set, replaces startEncoder with program (a test's encoder).
	start func(w, h, fps int) (videoEncoder, error)
	// late, if set, is how long an encode may take before it is late
	// (a test's bound; encodePace otherwise).
	late time.Duration
}

// videoEncoder is what the stream needs of an encoder: one access unit per
// screen, the first a key frame.
type videoEncoder interface {
	encode(pix []byte) (accessUnit, error)
	close() error
}

// wantsVideo reports whether c may get the H.264 stream (it decodes it,
// or its stream goes to a sink, and its Picture choice is not Sharp);
// hub.mu is held.
func (h *Hub) wantsVideo(c *client) bool {
	return (c.enc.h264 || c.sink != nil) && c.enc.video != videoSharp && h.vid.program != "" && !h.vid.off
}

// kickVideo tells the stream the screen changed, starting it when a
// viewer wants it; hub.mu is held.
func (h *Hub) kickVideo() {
	if !h.vid.running {
		wanted := false
		for c := range h.clients {
			wanted = wanted || h.wantsVideo(c)
		}
		if !wanted {
			return
		}
		h.vid.running = true
		h.vid.kick = make(chan struct{}, 1)
		go h.runVideo(h.vid.kick)
	}
	select {
	case h.vid.kick <- struct{}{}:
	default:
	}
}

// runVideo encodes the screen each time kick says it changed, until the
// hub ends or no viewer wants the stream.
func (h *Hub) runVideo(kick chan struct{}) {
	var e videoEncoder
	defer func() {
		if e != nil {
			e.close()
		}
	}()
	var pix []byte
	var next, started time.Time // next: when the next screen may be encoded
	var ew, eh int              // e's screen
	var eperiod time.Duration   // the pace e was told of (its bitrate's)
	pace := encodePace{fixed: h.vid.late}
	for {
		select {
		case <-h.done:
			return
		case <-kick:
		}
		if wait := time.Until(next); wait > 0 {
			select {
			case <-h.done:
				return
			case <-time.After(wait):
			}
		}
		h.mu.Lock()
		wanted := false
		for c := range h.clients {
			wanted = wanted || h.wantsVideo(c)
		}
		if !wanted {
			h.vid.running = false
			h.mu.Unlock()
			return
		}
		if !h.vid.due || !h.videoReady() { // a kick from before the screen was still, or one already encoded; or every viewer still has the last frame (take kicks when one takes it)
			h.mu.Unlock()
			continue
		}
		h.vid.due = false
		w, hh := h.fb.w, h.fb.h
		period := h.videoPeriod()
		// A new encoder for a new size, a viewer that waits for a key
		// frame, or a new pace (a sink came or went: the encoder's bitrate
		// is set for its pace); the last two at most one a videoKeyEvery.
		restart := e == nil || ew != w || eh != hh || ((h.vid.needKey || period != eperiod) && time.Since(started) >= videoKeyEvery)
		if restart {
			h.vid.needKey, eperiod = false, period
		}
		// Never faster than the encoder's bitrate is set for.
		next = nextFrame(next, time.Now(), max(period, eperiod))
		pix = h.fb.get(Rect{0, 0, w, hh}, pix)
		h.mu.Unlock()
		if restart {
			if e != nil {
				e.close()
			}
			ew, eh, started = w, hh, time.Now()
			var err error
			if e, err = h.startVideo(w, hh, int(time.Second/eperiod)); err != nil {
				h.videoFailed(err)
				return
			}
		}
		au, ok, err := h.encodeOnTime(e, restart, pix, &pace)
		if err != nil {
			h.videoFailed(err)
			return
		}
		if !ok { // stopped (stuck, or the hub ended): a new encoder at the next change, at most one a videoKeyEvery
			e, pix = nil, nil // pix may still be read by the stopped encode
			select {
			case <-h.done:
				return
			case <-time.After(time.Until(started.Add(videoKeyEvery))):
			}
			continue
		}
		h.mu.Lock()
		h.deliverVideo(au, w, hh, restart)
		h.repaintSettled() // for viewers whose video ended while it was encoded
		h.mu.Unlock()
	}
}

// startVideo starts an encoder for a w×hh screen encoded at most fps
// times a second (its first frame a key frame).
func (h *Hub) startVideo(w, hh, fps int) (videoEncoder, error) {
	if h.vid.start != nil {
		return h.vid.start(w, hh, fps)
	}
	e, err := startEncoder(context.Background(), h.vid.program, w, hh, fps)
	if err != nil {
		return nil, err // not a nil *encoder in the interface
	}
	return e, nil
}

// deliverVideo queues au, a w×h screen, to every viewer whose video is
// on and in the stream, and to those waiting when it is a key frame;
// fresh says it starts a new encoder's stream. A viewer in the stream
// whose video is off while another's is on (Auto while a Fast viewer
// types) leaves it: it would miss the frame, which the next ones build
// on. A frame that comes after every viewer's video ended goes to those
// in the stream, which then paint the screen again; hub.mu is held.
func (h *Hub) deliverVideo(au accessUnit, w, hh int, fresh bool) {
	limit := h.vid.maxQueued
	if limit == 0 {
		limit = maxVideoQueued
	}
	late := true
	for c := range h.clients {
		late = late && !h.videoOn(c)
	}
	for c := range h.clients {
		if !h.wantsVideo(c) || !h.videoOn(c) && !(late && c.inStream) {
			if c.inStream { // rejoins at a key frame
				c.inStream, c.video = false, nil
				if c.lossy {
					c.lossy = false
					c.addDamage(Rect{0, 0, h.fb.w, h.fb.h})
				}
			}
			continue
		}
		if c.sink != nil {
			h.toSink(c, au, w, hh)
			continue
		}
		if fresh || (!c.inStream && au.key) {
			c.video, c.videoReset = c.video[:0], true
		}
		if !c.inStream && !au.key {
			h.vid.needKey = true
			continue
		}
		c.inStream, c.lossy = true, true
		c.videoW, c.videoH = w, hh
		c.video = append(c.video, au.data...)
		if len(c.video) > limit { // it does not ask: tiles until the next key frame
			c.leaveStream(w, hh)
			h.vid.needKey = true
		}
		c.wakeUp()
	}
}

// moving counts r, a change of the screen made at now, by the motion
// rule and reports whether changes go as video; hub.mu is held.
func (h *Hub) moving(r Rect, now time.Time) bool {
	v := &h.vid
	if v.program == "" || v.off {
		return false
	}
	if since := now.Sub(v.windowAt); since >= motionWindow {
		busy := v.area*videoArea >= h.fb.w*h.fb.h
		switch {
		case !busy:
			v.busy = 0
		case since < 2*motionWindow: // the next window: a run goes on
			v.busy++
			v.lastBusy = now
		default: // quiet windows between
			v.busy, v.lastBusy = 1, now
		}
		v.windowAt, v.area = now, 0
	}
	v.area += r.W * r.H
	if !v.active && v.busy >= videoEnter {
		v.active = true
	}
	if v.active && now.Sub(v.lastBusy) >= videoSettle {
		h.calm()
	}
	return v.active
}

// videoChange notes that a change made at now goes as video to some
// viewer: it waits to be encoded, and the video settles videoSettle after
// the last such change; hub.mu is held.
func (h *Hub) videoChange(now time.Time) {
	v := &h.vid
	v.live, v.due, v.changed = true, true, now
	if v.settle == nil {
		v.settle = time.AfterFunc(videoSettle, h.settleVideo)
	} else {
		v.settle.Reset(videoSettle)
	}
	h.kickVideo()
}

// settleVideo ends the video once the screen has not changed for
// videoSettle (a change since the timer was set has set it again): every
// viewer that got video paints the screen again losslessly.
func (h *Hub) settleVideo() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vid.live && time.Since(h.vid.changed) >= videoSettle {
		h.vid.live, h.vid.due = false, false
		h.calm()
	}
}

// calm ends the motion: changes go to Auto's viewers as tiles again, and
// those that got video paint the screen again losslessly, the video's
// frames being lossy; hub.mu is held.
func (h *Hub) calm() {
	h.vid.active, h.vid.busy = false, 0
	h.repaintSettled()
}

// videoFailed turns H.264 off for the hub: its viewers get tiles.
func (h *Hub) videoFailed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vid.off, h.vid.running = true, false
	for c := range h.clients {
		c.leaveStream(h.fb.w, h.fb.h)
	}
	if h.log != nil {
		h.log.Warn("H.264 is off for this desktop; its viewers get tiles", "err", err)
	}
}

// leaveStream takes c out of the H.264 stream: it gets its screen as tiles
// and waits for a key frame; hub.mu is held.
func (c *client) leaveStream(w, hh int) {
	if !c.inStream {
		return
	}
	c.inStream, c.video, c.lossy = false, nil, false
	c.addDamage(Rect{0, 0, w, hh})
}
