package rfb

import (
	"encoding/binary"
	"testing"
	"time"
)

// setDesktopSize is a SetDesktopSize of one w×h screen with id 0.
func setDesktopSize(w, h int) []byte {
	msg := []byte{msgSetDesktopSize, 0}
	msg = binary.BigEndian.AppendUint16(msg, uint16(w))
	msg = binary.BigEndian.AppendUint16(msg, uint16(h))
	msg = append(msg, 1, 0)
	return append(msg, oneScreen(w, h)[4:]...)
}

// TestHub_SetDesktopSizeForTheSameLayout: a console asking, again and
// again, for the layout the desktop already has (noVNC did every 100 ms
// when its window was a fraction of a pixel off) gets the spec's answer
// each time (reason 1, status 0, to it; reason 2 to another client), and
// no pixels: not one request reaches the desktop and nobody's screen is
// painted again. A request for another size still goes to the desktop.
func TestHub_SetDesktopSizeForTheSameLayout(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	holder := dialTestClient(t, serve(true), encZRLE, encExtendedDesktopSize)
	other := dialTestClient(t, serve(false), encZRLE, encExtendedDesktopSize)
	for _, c := range []*testClient{holder, other} {
		c.request(false)
		must(t, c.next()) // the layout and the screen
		c.rects = map[int32]int{}
		c.request(true)
	}
	for i := range 20 {
		holder.conn.Write(setDesktopSize(64, 32))
		must(t, holder.next())
		if holder.reason != 1 || holder.status != 0 {
			t.Fatalf("answer %d: reason %d status %d; want 1 and 0", i, holder.reason, holder.status)
		}
		must(t, other.next())
		if other.reason != 2 {
			t.Fatalf("the other client's note %d: reason %d; want 2", i, other.reason)
		}
		for _, c := range []*testClient{holder, other} {
			c.request(true)
		}
	}
	for _, c := range []*testClient{holder, other} {
		if c.rects[encZRLE] != 0 || c.rects[encExtendedDesktopSize] != 20 {
			t.Errorf("rectangles after 20 requests for the same layout: %v; want 20 ExtendedDesktopSize and no pixels", c.rects)
		}
	}
	if got := d.inputs(); len(got) != 0 {
		t.Errorf("the desktop got %d SetDesktopSize for the size it has; want none", len(got))
	}
	holder.conn.Write(setDesktopSize(32, 16))
	select {
	case <-d.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a request for another size did not reach the desktop")
	}
}

// TestHub_FullRefreshLoop: a viewer that asks for its whole screen again
// and again (non-incremental requests) on a still desktop gets every
// request answered, but its whole screen at most once per fullEvery, not
// once per request: the hub used to encode the whole screen for each.
func TestHub_FullRefreshLoop(t *testing.T) {
	defer fullEvery.Store(fullEvery.Load())
	fullEvery.Store(int64(200 * time.Millisecond))
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	c := dialTestClient(t, serve(false), encRaw)
	start := time.Now()
	answers := 0
	for time.Since(start) < time.Second {
		c.request(false)
		must(t, c.next())
		answers++
	}
	elapsed := time.Since(start)
	if most := int(elapsed/repaintPeriod()) + 1; answers > most {
		t.Errorf("%d whole screens in %v for a viewer asking in a loop; want at most %d (one per %v)", answers, elapsed.Round(time.Millisecond), most, repaintPeriod())
	}
	if answers < 2 {
		t.Errorf("%d answers in %v; want every request answered, the later ones after %v", answers, elapsed.Round(time.Millisecond), repaintPeriod())
	}
	if c.rects[encRaw] != answers {
		t.Errorf("%d Raw rectangles in %d answers; want the whole screen in each", c.rects[encRaw], answers)
	}
}

// TestHub_TileRequestsWithinTheBudget: a viewer asking for one small tile
// at a time (as the soak's sessions do) is not slowed while its tiles add
// up to less than a screen a fullEvery; past that its next ask waits.
func TestHub_TileRequestsWithinTheBudget(t *testing.T) {
	defer fullEvery.Store(fullEvery.Load())
	fullEvery.Store(int64(time.Hour)) // a budget that does not refill within the test
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	c := dialTestClient(t, serve(false), encRaw)
	for i := range 32 { // 32 tiles of 8×8: the whole 64×32 screen's budget
		x, y := i%8*8, i/8*8
		c.conn.Write([]byte{msgUpdateRequest, 0, 0, byte(x), 0, byte(y), 0, 8, 0, 8})
		if err := c.next(); err != nil {
			t.Fatalf("tile %d within the budget: %v; want it answered at once", i, err)
		}
	}
	c.request(false)
	c.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if _, err := c.conn.Read(b[:]); err == nil {
		t.Error("the whole screen past a spent budget was sent at once; want it to wait for the budget")
	}
}

// TestHub_SetDesktopSizeTooLarge: a console asking for a desktop larger
// than the hub holds (a side over maxDimension) is refused as Xvnc refuses
// one over its own limit, reason 1 and status 3 (invalid screen layout);
// the desktop never sees the request (Xvnc would take up to 32768 a side,
// and its change would end every viewer's console), and the console stays
// at the old size.
func TestHub_SetDesktopSizeTooLarge(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	holder := dialTestClient(t, serve(true), encZRLE, encExtendedDesktopSize)
	holder.request(false)
	must(t, holder.next())
	for _, size := range [][2]int{{maxDimension + 1, 32}, {64, 20000}, {65535, 65535}} {
		holder.conn.Write(setDesktopSize(size[0], size[1]))
		must(t, holder.next())
		if holder.reason != 1 || holder.status != statusInvalidLayout {
			t.Errorf("%d×%d: reason %d status %d; want 1 and %d", size[0], size[1], holder.reason, holder.status, statusInvalidLayout)
		}
		if holder.fb.w != 64 || holder.fb.h != 32 {
			t.Errorf("%d×%d refused: the console's screen is %d×%d; want 64×32 still", size[0], size[1], holder.fb.w, holder.fb.h)
		}
	}
	if got := d.inputs(); len(got) != 0 {
		t.Errorf("the desktop got %d SetDesktopSize over the hub's limit; want none", len(got))
	}
	holder.conn.Write(setDesktopSize(32, 16))
	select {
	case <-d.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a request for a size within the limit did not reach the desktop")
	}
}
