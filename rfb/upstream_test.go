package rfb

import (
	"net"
	"path/filepath"
	"slices"
	"testing"
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
