package rfb

import (
	"bytes"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testrfb"
)

// badLayouts are layouts no desktop should be handed, by what is wrong.
var badLayouts = []struct {
	name string
	msg  []byte
}{
	{"0x0, as a monitor turned off", testrfb.SetDesktopSize(0, 0, [5]int{0, 0, 0, 0, 0})},
	{"no screen", testrfb.SetDesktopSize(64, 32)},
	{"an empty screen", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, 0, 64, 32}, [5]int{1, 0, 0, 0, 32})},
	{"a screen past the right edge", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, 0, 65, 32})},
	{"a screen at a negative x", testrfb.SetDesktopSize(64, 32, [5]int{0, -16, 0, 32, 32})},
	{"a screen at a negative y", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, -1, 64, 32})},
	{"overlapping screens", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, 0, 40, 32}, [5]int{1, 30, 0, 34, 32})},
	{"one screen twice", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, 0, 32, 32}, [5]int{0, 32, 0, 32, 32})},
	{"a side over the hub's limit", testrfb.SetDesktopSize(maxDimension+1, 32, [5]int{0, 0, 0, maxDimension + 1, 32})},
}

func TestValidLayout(t *testing.T) {
	for _, tt := range badLayouts {
		if validLayout(tt.msg) {
			t.Errorf("validLayout(%s) = true; want false", tt.name)
		}
	}
	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"one screen", testrfb.SetDesktopSize(64, 32, [5]int{0, 0, 0, 64, 32})},
		{"two side by side", testrfb.SetDesktopSize(96, 32, [5]int{0, 0, 0, 64, 32}, [5]int{1, 64, 0, 32, 16})},
		{"three, one below", testrfb.SetDesktopSize(96, 64, [5]int{0, 0, 0, 64, 32}, [5]int{1, 64, 0, 32, 32}, [5]int{2, 0, 32, 64, 32})},
		{"the hub's largest", testrfb.SetDesktopSize(maxDimension, maxDimension, [5]int{7, 0, 0, maxDimension, maxDimension})},
	} {
		if !validLayout(tt.msg) {
			t.Errorf("validLayout(%s) = false; want true", tt.name)
		}
	}
}

// TestHub_SetDesktopSizeBadLayout: a console with control asking for a
// layout no desktop should be handed (QEMU would hand any to its guest)
// is refused by the hub, reason 1 and status 3; a viewer without control
// asking for a good one is told it may not, status 1. The desktop sees
// none of them, and a good layout from the console still reaches it.
func TestHub_SetDesktopSizeBadLayout(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	serve := connectScripted(t, d)
	holder := dialTestClient(t, serve(true), encZRLE, encExtendedDesktopSize)
	viewer := dialTestClient(t, serve(false), encZRLE, encExtendedDesktopSize)
	for _, c := range []*testClient{holder, viewer} {
		c.request(false)
		must(t, c.next())
	}
	for _, tt := range badLayouts {
		holder.conn.Write(tt.msg)
		must(t, holder.next())
		if holder.reason != 1 || holder.status != statusInvalidLayout {
			t.Errorf("%s: reason %d status %d; want 1 and %d", tt.name, holder.reason, holder.status, statusInvalidLayout)
		}
	}
	viewer.conn.Write(testrfb.SetDesktopSize(32, 16, [5]int{0, 0, 0, 32, 16}))
	must(t, viewer.next())
	if viewer.reason != 1 || viewer.status != statusProhibited {
		t.Errorf("a viewer's SetDesktopSize: reason %d status %d; want 1 and %d", viewer.reason, viewer.status, statusProhibited)
	}
	if got := d.inputs(); len(got) != 0 {
		t.Errorf("the desktop got %d SetDesktopSize: %x; want none", len(got), got)
	}
	good := testrfb.SetDesktopSize(96, 32, [5]int{0, 0, 0, 64, 32}, [5]int{1, 64, 0, 32, 32})
	holder.conn.Write(good)
	select {
	case <-d.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a good layout did not reach the desktop")
	}
	if got := d.inputs(); len(got) != 1 || !bytes.Equal(got[0], good) {
		t.Errorf("the desktop got %x; want the good layout", got)
	}
}
