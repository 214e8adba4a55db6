package rfb

import (
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestHub_AsksALocalDesktopForRaw: a hub whose desktop is on this machine
// (a Unix socket, as a local Xvnc's or QEMU's) does not list ZRLE, so the
// desktop sends Raw and neither side deflates; across TCP it lists ZRLE
// first. Either way it lists Raw and CopyRect.
func TestHub_AsksALocalDesktopForRaw(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "vnc.sock")
			}
			ln, err := net.Listen(network, addr)
			must(t, err)
			defer ln.Close()
			peer, err := net.Dial(network, ln.Addr().String())
			must(t, err)
			conn, err := ln.Accept()
			must(t, err)
			d := newScriptedDesktopOn(t, 64, 48, conn, peer)
			connectScripted(t, d)
			d.mu.Lock()
			encs := d.encodings
			d.mu.Unlock()
			if !slices.Contains(encs, encRaw) || !slices.Contains(encs, encCopyRect) {
				t.Errorf("over %s the hub asked for %v; want Raw and CopyRect among them", network, encs)
			}
			if zrle := slices.Contains(encs, encZRLE); zrle != (network == "tcp") || network == "tcp" && encs[0] != encZRLE {
				t.Errorf("over %s the hub asked for %v; want ZRLE first across a network, none over a Unix socket", network, encs)
			}
		})
	}
}

// TestHub_AsksQEMUNothingMoreAfterItsNews: QEMU (by its desktop's name)
// sends some updates unasked (the answer to a SetDesktopSize it passes to
// the guest, the Extended Key Event's acknowledgement), which leave the
// hub's request out, so the hub asks again only after pixels: asking
// after QEMU's answer lost a split display's every later update
// (TestKube_SplitOnQEMU). Xvnc, which acknowledges the Extended Key Event
// too, sends such news in answer to a request, and is asked again after it.
func TestHub_AsksQEMUNothingMoreAfterItsNews(t *testing.T) {
	for _, qemu := range []bool{true, false} {
		d := newScriptedDesktop(t, 64, 32)
		d.qemuKeys = true
		if qemu {
			d.name = "QEMU (corral-vm-1)"
		}
		hub, err := Connect(d.peer)
		must(t, err)
		defer hub.Close()
		// The acknowledgement first (it follows the first frame).
		for deadline := time.Now().Add(10 * time.Second); !hubTakesQEMUKeys(hub); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the hub did not read the Extended Key Event's acknowledgement in 10s")
			}
		}
		must(t, d.answer(4))
		// Then pixels at a new size: the request after them names it,
		// and comes after any the news drew.
		must(t, d.grow(80, 40, [3]byte{1, 2, 3}))
		var requests [][]byte
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			d.mu.Lock()
			requests = slices.Clone(d.requests)
			d.mu.Unlock()
			if n := len(requests); n > 0 && requests[n-1][7] == 80 || time.Now().After(deadline) {
				break
			}
		}
		// The first, full request, one after the first frame, one after
		// each piece of news (not QEMU's: the acknowledgement, the
		// answer), one after the new size's pixels.
		want := 3
		if !qemu {
			want = 5
		}
		if len(requests) != want || requests[len(requests)-1][7] != 80 {
			t.Errorf("QEMU %v: the hub sent %d update requests, the last %v; want %d, the last for 80x40", qemu, len(requests), requests[len(requests)-1:], want)
		}
	}
}

// hubTakesQEMUKeys reports whether hub has read its desktop's Extended
// Key Event acknowledgement.
func hubTakesQEMUKeys(h *Hub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.qemuKeys
}
