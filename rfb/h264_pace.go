package rfb

import (
	"math"
	"time"
)

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

// heldBack returns how long the told pace, holding the screen back since
// from, kept a viewer in the stream waiting for it: a sink (it takes
// every frame) all that time, a viewer that asks the time since it asked,
// if it still waits for a frame; the longest; hub.mu is held.
func (h *Hub) heldBack(from time.Time) time.Duration {
	now := time.Now()
	var d time.Duration
	for c := range h.clients {
		switch {
		case !h.videoOn(c):
		case c.sink != nil:
			d = max(d, now.Sub(from))
		case c.inStream && c.requested && len(c.video) == 0:
			d = max(d, now.Sub(later(from, c.asked)))
		}
	}
	return d
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

// The pace an encoder is told. x264 spends h264Bitrate a second by the
// frame, h264Bitrate/fps a frame at the pace it was told (real times on
// the frames would let it follow any pace, but it then answers each frame
// one frame late), so a stream fed at half the pace it was told carries
// half the budget a second: a viewer that takes frames 15 times a second
// from an encoder told 60 got a quarter of it, each frame the worse for
// it. So while the viewers hold the stream back (its frames wait for
// them to take the last), the hub tells a new encoder the pace it fed
// the old one, down to a quarter of the fastest (60, or 30 while a sink
// takes the stream), and feeds it at most a quarter faster than told.
// While the stream holds the viewers back (they wait for a frame: the
// encoder or the desktop is the slower, as on a busy machine) it tells
// the fastest pace: a slower one there gives each frame more bytes, which
// take longer to encode and send, and the pace drops further (tried in
// session 36 with the measured pace alone, and backed out).
const (
	// paceWindow is how long a burst's pace is measured before the
	// encoder may be told another.
	paceWindow = 2 * time.Second
	// paceSlowest says the slowest pace told, the fastest's 1/paceSlowest:
	// a viewer slower than that is one whose link holds it back, where
	// bigger frames would only take longer.
	paceSlowest = 4
	// paceAbove is how much faster than the told pace the hub may feed
	// the encoder (up to the fastest): the stream then spends up to that
	// much more than h264Bitrate a second, until the pace is told again.
	paceAbove = 1.25
	// paceChange is by how much the measured pace must differ from the
	// told one for the encoder to be told it (a new encoder each time,
	// and a key frame where faster).
	paceChange = 1.2
	// paceBoundShare is the share of a window in which the stream's
	// changed screen waited for its viewers to take the last frame that
	// says they, not the encoder or the desktop, set its pace: only then
	// is a slower pace told. A viewer at half the stream's pace leaves
	// each frame waiting most of its period; one that keeps up, almost
	// none (it asks again before the next frame is encoded).
	paceBoundShare = 1.0 / 2
	// paceHeldShare is the share of a window in which the told pace kept
	// a viewer waiting (it asked, or is a sink, and the screen had
	// changed: heldBack) that says the viewers could go much faster: the
	// encoder is then told the fastest pace again. A viewer at the told
	// pace waits for none (its frame is made while it looks at the last);
	// one that could go twice as fast waits about half the time.
	paceHeldShare = 1.0 / 3
)

// toldPace is the pace a hub's encoder was told (fps) and the one it
// should be told (want), which the frames it encodes say: a faster one
// (a sink came or went, the viewers no longer hold the stream back, or
// the told pace kept one waiting) with the next frame, a slower one where
// the encoder's next frame would be a key frame anyway (its key-int-max,
// h264KeySeconds of frames at its pace), so that telling it costs no key
// frame of its own; runVideo's goroutine owns it.
type toldPace struct {
	fps, want, fastest int
	sinceKey           int // frames since the encoder's last key frame, that one included
	// The window being measured: its first and last frame, how many
	// frames, how long the told pace kept a viewer waiting (held) and how
	// long changed screens waited for the viewers (bound).
	from, last  time.Time
	frames      int
	held, bound time.Duration
}

// setFastest notes the fastest pace the hub feeds now (60, or 30 while a
// sink takes the stream); a new one is the pace to tell.
func (p *toldPace) setFastest(fps int) {
	if fps != p.fastest {
		p.fastest, p.want, p.frames = fps, fps, 0
	}
}

// tellNow reports whether the encoder should be told another pace with
// its next frame: a faster one, or one below the fastest now.
func (p *toldPace) tellNow() bool {
	return p.want > p.fps || p.fps > p.fastest
}

// tellAtKey reports whether the encoder should be told a slower pace and
// its next frame would be a key frame anyway.
func (p *toldPace) tellAtKey() bool {
	return p.want < p.fps && p.sinceKey >= h264KeySeconds*p.fps
}

// tell notes that a new encoder is told want.
func (p *toldPace) tell() {
	p.fps, p.sinceKey, p.frames = p.want, 0, 0
}

// period is the shortest time between two screens at the told pace (a
// paceAbove faster).
func (p *toldPace) period() time.Duration {
	if p.fps == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / (paceAbove * float64(p.fps)))
}

// frame notes a screen encoded at now, for which the told pace kept a
// viewer waiting for held and which waited for the viewers for bound,
// that came back a key frame or not; at the end of a window of a burst
// it sets the pace to tell.
func (p *toldPace) frame(now time.Time, held, bound time.Duration, key bool) {
	if key {
		p.sinceKey = 1
	} else {
		p.sinceKey++
	}
	if p.frames == 0 || now.Sub(p.last) >= videoSettle { // a burst's first frame
		p.from, p.last, p.frames, p.held, p.bound = now, now, 1, 0, 0
		return
	}
	p.frames, p.last, p.held, p.bound = p.frames+1, now, p.held+held, p.bound+bound
	span := now.Sub(p.from)
	if span < paceWindow {
		return
	}
	p.want = fittingPace(float64(p.frames-1)/span.Seconds(), p.held.Seconds()/span.Seconds(), p.bound.Seconds()/span.Seconds(), p.fps, p.fastest)
	p.from, p.frames, p.held, p.bound = now, 1, 0, 0
}

// fittingPace returns the pace to tell an encoder told told, of at most
// fastest, whose stream was fed rate screens a second while the told pace
// kept a viewer waiting for heldShare of the time and its changed screens
// waited for the viewers for boundShare: the fastest pace if the viewers
// did not hold the stream back (paceBoundShare of the time; half that
// once told slower) or the told pace kept one waiting much;
// else rate, within the fastest and a paceSlowest of it, if it differs
// from told by more than paceChange; else told.
func fittingPace(rate, heldShare, boundShare float64, told, fastest int) int {
	need := paceBoundShare
	if told < fastest {
		need /= 2 // once slower, it stays so while they hold it back a quarter of the time
	}
	if boundShare < need || heldShare >= paceHeldShare {
		return fastest
	}
	fit := min(fastest, max((fastest+paceSlowest-1)/paceSlowest, int(math.Round(rate))))
	if float64(fit) > paceChange*float64(told) || paceChange*float64(fit) < float64(told) {
		return fit
	}
	return told
}
