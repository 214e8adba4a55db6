package local

import (
	"bytes"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// TestHeadConn_FoldsOnClose: closing a head's connection (its screen hub's
// last client gone) first sends QEMU a SetDesktopSize of one 0x0 screen,
// which turns the guest's monitor off, once, after what was written
// before it, and hangs up only after QEMU has (a hang-up first made QEMU
// drop the fold unread).
func TestHeadConn_FoldsOnClose(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "vnc2.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte)
	go func() {
		qemu, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(qemu) // until the portal's sending half closes
		qemu.Close()
		got <- b
	}()
	raw, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newHeadConn(raw.(*net.UnixConn))
	hub := make(chan error)
	go func() { // the hub's reader, which sees QEMU hang up
		_, err := io.ReadAll(c)
		hub <- err
	}()
	if _, err := c.Write([]byte{3, 1, 0, 0, 0, 0, 0, 1, 0, 1}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	b := <-got
	want := append([]byte{3, 1, 0, 0, 0, 0, 0, 1, 0, 1}, 251, 0, 0, 0, 0, 0, 1, 0)
	want = append(want, make([]byte, 16)...)
	if !bytes.Equal(b, want) {
		t.Errorf("QEMU read % x; want the update request, then a SetDesktopSize of one 0x0 screen (% x)", b, want)
	}
	<-hub
}
