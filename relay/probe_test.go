package relay

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// serveOnce accepts one connection on a loopback listener and runs fn on it.
func serveOnce(t *testing.T, fn func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fn(c)
	}()
	return ln.Addr().String()
}

func TestProbeRDP(t *testing.T) {
	confirm := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0, 0, 0x12, 0x34, 0, 0x02, 0x1f, 0x08, 0x00, 0x02, 0, 0, 0}
	failure := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0, 0, 0x12, 0x34, 0, 0x03, 0x00, 0x08, 0x00, 0x05, 0, 0, 0}
	rfb := []byte("RFB 003.008\n")
	tests := []struct {
		name   string
		answer []byte // nil: read the request, then say nothing
		hangUp bool
		ok     bool
	}{
		{"Confirm", confirm, false, true},
		{"NegotiationFailure", failure, false, true},
		{"VNCServer", rfb, false, false},
		{"HangsUp", nil, true, false},
		{"Silent", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			probed := make(chan struct{}) // the silent server says nothing until the probe is done
			defer close(probed)
			addr := serveOnce(t, func(c net.Conn) {
				buf := make([]byte, len(x224Probe))
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, _ := c.Read(buf)
				got = buf[:n]
				switch {
				case tt.answer != nil:
					c.Write(tt.answer)
				case tt.hangUp:
				default:
					select {
					case <-probed:
					case <-time.After(time.Minute):
					}
				}
			})
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- ProbeRDP(ctx, conn) }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second): // the silent server would keep a probe that ignored its context
				t.Fatal("ProbeRDP did not return in 30s; want it bounded by its 300ms context")
			}
			if (err == nil) != tt.ok {
				t.Fatalf("ProbeRDP = %v; want ok=%v", err, tt.ok)
			}
			if tt.name == "Silent" && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("ProbeRDP against a silent server = %v; want it ended by its context's deadline", err)
			}
			if tt.name == "VNCServer" && !errors.Is(err, ErrNotRDP) {
				t.Errorf("ProbeRDP against VNC = %v; want ErrNotRDP", err)
			}
			if tt.name == "Confirm" && string(got) != string(x224Probe) {
				t.Errorf("server read % x; want the X.224 request % x", got, x224Probe)
			}
		})
	}
}
