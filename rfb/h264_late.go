package rfb

import "time"

// videoLate is the least time a viewer in the H.264 stream waits for a
// frame being encoded (15 frames' time, what a still screen waits) before
// it gets tiles: changes made while the stream has them are held for its
// next frame, so a slow or stuck encoder would otherwise freeze the
// viewer's screen for as long as the motion lasts (up to encodeTimeout).
// On a machine where encodes take longer, the bound is lateFactor times
// the typical encode (encodePace).
const (
	videoLate  = videoSettle
	lateFactor = 4
)

// encodePace is how long a hub's encodes take, which says when one is
// late: on a loaded machine a screen's encode takes hundreds of
// milliseconds (290 ms median, 635 ms at most, at 1280×715 under a load
// of 20 on 2 cores), which must not count as stuck.
type encodePace struct {
	typical time.Duration // a moving average of the encodes; 0 before the first
	fixed   time.Duration // if set, the bound (a test's)
}

// bound returns how long an encode may take before it is late.
func (p *encodePace) bound() time.Duration {
	if p.fixed != 0 {
		return p.fixed
	}
	return max(videoLate, lateFactor*p.typical)
}

// note records an encode that took d; first says it was a fresh encoder's
// first, slow while its process starts, which only seeds the average.
func (p *encodePace) note(d time.Duration, first bool) {
	switch {
	case p.typical == 0:
		p.typical = d
	case !first:
		p.typical += (d - p.typical) / 8
	}
}

// encodeOnTime encodes pix with e. An encode that has not answered within
// pace's bound takes the viewers in the stream out of it (encodeLate):
// they get the screen as tiles at once and rejoin at the next key frame.
// Then, unless first (a fresh encoder's first screen, slow while its
// process starts, which encodeTimeout bounds), e is stopped and ok is
// false: the caller starts a new one. ok is false too when the hub ended
// (e is stopped then too). pix may be read until e's encode ends.
func (h *Hub) encodeOnTime(e videoEncoder, first bool, pix []byte, pace *encodePace) (au accessUnit, ok bool, err error) {
	type result struct {
		au  accessUnit
		err error
	}
	res := make(chan result, 1)
	began := time.Now()
	go func() {
		au, err := e.encode(pix)
		res <- result{au, err}
	}()
	bound := pace.bound()
	late := time.NewTimer(bound)
	defer late.Stop()
	for {
		select {
		case r := <-res:
			pace.note(time.Since(began), first)
			return r.au, true, r.err
		case <-h.done:
			e.close()
			return accessUnit{}, false, nil
		case <-late.C:
			h.encodeLate(!first, bound)
			if !first {
				pace.note(bound, false) // at least: the next bound grows if the machine slowed
				e.close()               // its encode ends with an error nobody reads
				return accessUnit{}, false, nil
			}
		}
	}
}

// encodeLate takes every viewer out of the stream, to tiles, while an
// encode is late by bound; stopped says the encoder is being replaced.
func (h *Hub) encodeLate(stopped bool, bound time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for c := range h.clients {
		if c.inStream {
			c.leaveStream(h.fb.w, h.fb.h)
			n++
		}
	}
	if h.log != nil && stopped {
		h.log.Warn("the H.264 encoder gave no frame in time; it is replaced and its viewers get tiles meanwhile", "viewers", n, "after", bound)
	}
}
