package agent

import (
	"bytes"
	"context"
	"image"
	"net"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Join opens a control client's connection to ref's screen hub for the
// agent id (a token's identity, named by id.Agent():
// "bot:alice/test-runner"): the agent's picture and input go through the
// same hub as a person's console, so watchers see the agent work (and
// the holder's page lists it while it is open). While the connection is
// open it counts as a console of the desktop's claim, as a person's
// does: the disconnect grace waits for it to close.
type Join func(ctx context.Context, id vdi.Identity, ref vdi.Ref) (net.Conn, error)

// DefaultSeatIdle is how long a seat's screen connection stays open
// without a tool call, unless Config.SeatIdle says otherwise. While it is
// open it counts as a console of the desktop (Join), so an agent that
// pauses to think keeps its desktop from the disconnect grace; one that
// stopped calling lets it go after this.
const DefaultSeatIdle = 5 * time.Minute

// seat is an agent's view of one desktop: its live picture and the PNG
// of the picture's last state asked for.
type seat struct {
	v     *snapshot.Viewer
	used  time.Time   // the last call's time; seats.mu guards it
	timer *time.Timer // closes the seat once unused for seats.idle

	mu      sync.Mutex
	pngGen  uint64
	pngShot shot // what the cached PNG shows
	png     []byte
	shown   uint64 // the generation the agent last saw
}

// seats keeps the open seats, one per desktop.
type seats struct {
	join Join
	idle time.Duration

	mu   sync.Mutex
	open map[vdi.Ref]*seat
}

// get returns ref's seat, joining its screen as agent id when none is
// open.
func (s *seats) get(ctx context.Context, ref vdi.Ref, id vdi.Identity) (*seat, error) {
	s.mu.Lock()
	st := s.open[ref]
	if st != nil {
		select {
		case <-st.v.Done():
			delete(s.open, ref)
			st = nil
		default:
			st.used = time.Now()
		}
	}
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	conn, err := s.join(ctx, id, ref)
	if err != nil {
		return nil, err
	}
	v, err := snapshot.Watch(conn)
	if err != nil {
		return nil, &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The screen of " + ref.String() + " did not answer.", Hint: "The desktop may be starting; try again in a moment."}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := v.WaitChange(wctx, 0); err != nil { // the first picture
		v.Close()
		return nil, &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The screen of " + ref.String() + " sent no picture.", Hint: "Try again in a moment."}
	}
	st = &seat{v: v, used: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.open[ref]; old != nil { // another call joined meanwhile
		v.Close()
		return old, nil
	}
	if s.open == nil {
		s.open = map[vdi.Ref]*seat{}
	}
	s.open[ref] = st
	st.timer = time.AfterFunc(s.idle, func() { s.expire(ref, st) })
	return st, nil
}

// expire closes ref's seat st once it has had no call for s.idle, or
// looks again when that will be.
func (s *seats) expire(ref vdi.Ref, st *seat) {
	s.mu.Lock()
	if s.open[ref] != st {
		s.mu.Unlock()
		return // closed already
	}
	if left := s.idle - time.Since(st.used); left > 0 {
		st.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	delete(s.open, ref)
	s.mu.Unlock()
	st.v.Close()
}

// close ends ref's seat, if open.
func (s *seats) close(ref vdi.Ref) {
	s.mu.Lock()
	st := s.open[ref]
	delete(s.open, ref)
	s.mu.Unlock()
	if st != nil {
		st.timer.Stop()
		st.v.Close()
	}
}

// shot is what a screenshot shows: the part of the screen crop (the
// whole screen when empty), scaled to at most width pixels wide (0: not
// scaled).
type shot struct {
	crop  image.Rectangle
	width int
}

// screenshot returns the picture as a PNG as sh asks: encoded once per
// screen state and shot, however often asked.
func (st *seat) screenshot(sh shot) ([]byte, uint64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	gen := st.v.Gen()
	if st.png != nil && st.pngGen == gen && st.pngShot == sh {
		st.shown = gen
		return st.png, gen, nil
	}
	img, gen := st.v.Frame()
	if !sh.crop.Empty() {
		img = img.SubImage(sh.crop.Intersect(img.Bounds())).(*image.RGBA)
	}
	var b bytes.Buffer
	if err := snapshot.PNG(&b, snapshot.Scale(img, sh.width)); err != nil {
		return nil, 0, err
	}
	st.png, st.pngGen, st.pngShot, st.shown = b.Bytes(), gen, sh, gen
	return st.png, gen, nil
}

// waitChange waits up to d for the screen to change from what the agent
// last saw, and reports whether it did.
func (st *seat) waitChange(ctx context.Context, d time.Duration) (bool, error) {
	st.mu.Lock()
	since := st.shown
	st.mu.Unlock()
	if since == 0 {
		since = st.v.Gen()
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	gen, err := st.v.WaitChange(ctx, since)
	if err == context.DeadlineExceeded {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	st.shown = gen
	st.mu.Unlock()
	return true, nil
}
