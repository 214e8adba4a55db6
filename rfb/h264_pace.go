package rfb

import "time"

// The H.264 stream's pace: when the next screen is encoded (runVideo).

// nextFrame returns when the screen after one encoded at now may be
// encoded, next having been when this one might: a period after next, so
// that a late frame does not push every later one back a whole period
// (the rate stays at most one a period), but at least half a period after
// now.
func nextFrame(next, now time.Time, period time.Duration) time.Time {
	next = next.Add(period)
	if soonest := now.Add(period / 2); next.Before(soonest) {
		return soonest
	}
	return next
}

// videoPeriod is the shortest time between two encoded screens now:
// sinkFrame while a sink takes the stream, else videoFrame; hub.mu is
// held.
func (h *Hub) videoPeriod() time.Duration {
	for c := range h.clients {
		if c.sink != nil && h.wantsVideo(c) {
			return sinkFrame
		}
	}
	return videoFrame
}

// videoReady reports whether a viewer would take the next frame: one
// whose video is on that is a sink, waits for a key frame, or took the
// stream's last frame (its client asked again since); hub.mu is held.
// While none would, the screen waits, its changes adding up, rather than
// queue frames that would go out together: the stream drops to the pace
// of its fastest viewer, and slower ones get frames in batches (bounded
// by maxVideoQueued).
func (h *Hub) videoReady() bool {
	for c := range h.clients {
		if h.videoOn(c) && (c.sink != nil || !c.inStream || len(c.video) == 0) {
			return true
		}
	}
	return false
}

// videoTaken tells the stream that a viewer took its frames: a screen
// waiting for a ready viewer may go; hub.mu is held.
func (h *Hub) videoTaken() {
	if h.vid.running && h.vid.due {
		select {
		case h.vid.kick <- struct{}{}:
		default:
		}
	}
}
