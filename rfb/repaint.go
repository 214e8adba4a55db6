package rfb

import (
	"sync/atomic"
	"time"
)

// fullEvery is how long a client's budget takes to refill one whole
// screen of repaints it asks for itself (non-incremental requests, a new
// pixel format) beyond what changed. noVNC asks for its whole screen once,
// at connect; TigerVNC's viewer after a pixel format change and on its
// Refresh; the soak's sessions for a 64×64 tile at a time. A viewer asking
// for its whole screen in a loop kept the hub encoding the whole screen
// for it, ~0.5–0.75 of a core. A repaint beyond the budget waits until the
// budget holds it: it is answered, never dropped. Atomic: tests change it
// while hubs of earlier tests may still be winding down.
var fullEvery atomic.Int64 // a time.Duration

func init() { fullEvery.Store(int64(time.Second)) }

// repaintPeriod returns fullEvery.
func repaintPeriod() time.Duration { return time.Duration(fullEvery.Load()) }

// repaintBudget is what of a client's asked-for repaints may go now, in
// pixels: up to one whole screen, refilled at a screen a fullEvery.
type repaintBudget struct {
	pixels float64   // what is left
	at     time.Time // when it was last refilled; zero: never used
	due    Rect      // a repaint waiting for the budget
	wake   time.Time // when its timer wakes the client's writer
}

// spend takes r's pixels from the budget of a screen of screen pixels, or
// returns how long until it holds them.
func (b *repaintBudget) spend(r Rect, screen int, now time.Time) time.Duration {
	full := float64(screen)
	if b.at.IsZero() {
		b.pixels = full
	} else {
		b.pixels = min(full, b.pixels+full*float64(now.Sub(b.at))/float64(repaintPeriod()))
	}
	b.at = now
	need := float64(r.W * r.H)
	if b.pixels >= need {
		b.pixels -= need
		return 0
	}
	return time.Duration((need-b.pixels)/full*float64(repaintPeriod())) + time.Millisecond
}

// askFull notes that the client asked for r's pixels whether they changed
// or not; hub.mu is held. What its damage already covers adds nothing;
// the rest is painted now if its budget holds it, or when it does.
func (c *client) askFull(r Rect) {
	h := c.hub
	if r = r.clip(h.fb.w, h.fb.h); r.empty() {
		return
	}
	for _, d := range c.damage {
		if d.covers(r) {
			return
		}
	}
	b := &c.repaints
	if !b.due.empty() { // one already waits, with its timer
		b.due = b.due.union(r)
		return
	}
	now := time.Now()
	if wait := b.spend(r, h.fb.w*h.fb.h, now); wait > 0 {
		b.due, b.wake = r, now.Add(wait)
		time.AfterFunc(wait, c.wakeUp)
		return
	}
	c.addDamage(r)
}

// repaintDue paints the repaint that waited for the client's budget once
// its timer is due and the budget holds it; hub.mu is held.
func (c *client) repaintDue() {
	b := &c.repaints
	now := time.Now()
	if b.due.empty() || now.Before(b.wake) {
		return
	}
	h := c.hub
	r := b.due.clip(h.fb.w, h.fb.h)
	if r.empty() {
		b.due = Rect{}
		return
	}
	if wait := b.spend(r, h.fb.w*h.fb.h, now); wait > 0 { // the screen grew meanwhile
		b.wake = now.Add(wait)
		time.AfterFunc(wait, c.wakeUp)
		return
	}
	b.due = Rect{}
	c.addDamage(r)
}
