package rfb

import (
	"bytes"
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

// TestHub_OnlyControlReachesTheDesktop: a client without control sends
// every kind of input and none reaches the desktop; the same from a client
// with control all does, in order. The desktop's clipboard goes only to
// the client with control.
func TestHub_OnlyControlReachesTheDesktop(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	hub, err := Connect(d.peer)
	must(t, err)
	defer hub.Close()
	serve := func(control bool) *testClient {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, control)
		t.Cleanup(func() { b.Close() })
		return dialTestClient(t, b, encZRLE, encExtendedClipboard)
	}
	viewer, holder := serve(false), serve(true)
	inputs := [][]byte{
		{msgKeyEvent, 1, 0, 0, 0, 0, 0, 'a'},
		{msgPointerEvent, 1, 0, 10, 0, 10},
		append([]byte{msgClientCutText, 0, 0, 0, 0, 0, 0, 3}, "pwd"...),
		{msgSetDesktopSize, 0, 0, 32, 0, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 16, 0, 0, 0, 0},
	}
	for _, m := range inputs {
		viewer.conn.Write(m)
	}
	viewer.request(false) // a round trip: the viewer's input was all read
	must(t, viewer.next())
	if got := d.inputs(); len(got) != 0 {
		t.Fatalf("the desktop got %d input messages from a client without control: %q", len(got), got)
	}
	for _, m := range inputs {
		holder.conn.Write(m)
	}
	for range inputs {
		select {
		case <-d.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("the desktop got %d of %d input messages from the client with control", len(d.inputs()), len(inputs))
		}
	}
	if got := d.inputs(); !slices.EqualFunc(got, inputs, bytes.Equal) {
		t.Errorf("the desktop got %q; want %q", got, inputs)
	}

	must(t, d.cutText("secret"))
	must(t, d.frame([3]byte{1, 2, 3})) // after the cut text, in order
	for _, c := range []*testClient{holder, viewer} {
		for c.pixel(0, 0) != [3]byte{1, 2, 3} {
			c.request(true)
			must(t, c.next())
		}
	}
	if len(holder.cutTexts) != 1 || string(holder.cutTexts[0]) != "secret" {
		t.Errorf("the client with control got cut texts %q; want [secret]", holder.cutTexts)
	}
	if len(viewer.cutTexts) != 0 {
		t.Errorf("the client without control got the desktop's clipboard %q", viewer.cutTexts)
	}
}

// TestHub_StalledClientKeepsNoOneWaiting: a client that stops reading
// holds up neither the desktop nor another client, which sees the last of
// 200 frames; the stalled client, reading again, gets the last frame too.
func TestHub_StalledClientKeepsNoOneWaiting(t *testing.T) {
	d := newScriptedDesktop(t, 256, 256)
	hub, err := Connect(d.peer)
	must(t, err)
	defer hub.Close()
	serve := func() *testClient {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, false)
		t.Cleanup(func() { b.Close() })
		return dialTestClient(t, b, encZRLE)
	}
	stalled, live := serve(), serve()
	stalled.request(false) // asks, then reads nothing
	drawn := make(chan error, 1)
	go func() {
		for i := range 200 {
			if err := d.frame([3]byte{byte(i), byte(i >> 8), 7}); err != nil {
				drawn <- err
				return
			}
		}
		drawn <- nil
	}()
	last := [3]byte{199, 0, 7}
	for live.pixel(0, 0) != last {
		live.request(true)
		must(t, live.next())
	}
	select {
	case err := <-drawn:
		must(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the desktop could not draw 200 frames while a client was stalled")
	}
	for stalled.pixel(0, 0) != last {
		must(t, stalled.next())
		stalled.request(true)
	}
}
