package relay_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// chunk is the size of every write in the benchmarks: one client message,
// one desktop write, one raw TCP write.
const chunk = 32 << 10

// sink reads conn to EOF with one chunk-sized buffer and sends the total.
func sink(conn net.Conn) <-chan int64 {
	done := make(chan int64, 1)
	go func() {
		defer conn.Close()
		buf := make([]byte, chunk)
		var total int64
		for {
			n, err := conn.Read(buf)
			total += int64(n)
			if err != nil {
				done <- total
				return
			}
		}
	}()
	return done
}

// maskedFrame returns a client (masked) websocket frame, so the benchmark
// client writes pre-built bytes and costs no more than a raw TCP writer:
// what is measured is the relay.
func maskedFrame(op byte, payload []byte) []byte {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	f := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n <= 0xffff:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	f = append(f, key[:]...)
	for i, c := range payload {
		f = append(f, c^key[i%4])
	}
	return f
}

// BenchmarkRelay sends 32 KiB binary messages from a client through the
// relay to a TCP sink on the desktop side.
func BenchmarkRelay(b *testing.B) {
	h := MustHarness(b, "tcp", relay.Options{})
	ws, desk := h.MustConnect(b)
	defer ws.Close()
	done := sink(desk)
	raw := ws.NetConn()
	frame := maskedFrame(websocket.BinaryMessage, make([]byte, chunk))
	closeFrame := maskedFrame(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))

	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := raw.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	raw.Write(closeFrame)
	total := <-done
	b.StopTimer()

	if want := int64(b.N) * chunk; total != want {
		b.Fatalf("sink got %d bytes; want %d", total, want)
	}
	if r := h.MustResult(b); r.err != nil {
		b.Fatalf("Pipe error = %v", r.err)
	}
}

// BenchmarkRelayOut sends 32 KiB desktop writes through the relay to a
// client that parses the frames itself (no per-message allocations).
func BenchmarkRelayOut(b *testing.B) { benchRelayOut(b, relay.Options{}) }

// benchRelayOut is BenchmarkRelayOut through a relay with opts.
func benchRelayOut(b *testing.B, opts relay.Options) {
	h := MustHarness(b, "tcp", opts)
	ws, desk := h.MustConnect(b)
	defer ws.Close()
	want := int64(b.N) * chunk
	done := make(chan int64, 1)
	go func() {
		done <- readFrames(bufio.NewReaderSize(ws.NetConn(), chunk), want)
	}()
	data := make([]byte, chunk)

	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := desk.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	total := <-done
	b.StopTimer()

	ws.NetConn().Write(maskedFrame(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")))
	desk.Close()
	if total != want {
		b.Fatalf("client got %d bytes; want %d", total, want)
	}
	if r := h.MustResult(b); r.err != nil {
		b.Fatalf("Pipe error = %v", r.err)
	}
}

// readFrames reads unmasked server frames until want payload bytes arrived.
func readFrames(r *bufio.Reader, want int64) int64 {
	var total int64
	hdr := make([]byte, 8)
	for total < want {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return total
		}
		op, n := hdr[0]&0x0f, int64(hdr[1]&0x7f)
		switch n {
		case 126:
			io.ReadFull(r, hdr[:2])
			n = int64(binary.BigEndian.Uint16(hdr))
		case 127:
			io.ReadFull(r, hdr[:8])
			n = int64(binary.BigEndian.Uint64(hdr))
		}
		if op == websocket.BinaryMessage || op == 0 {
			total += n
		}
		if _, err := r.Discard(int(n)); err != nil {
			return total
		}
	}
	return total
}

// BenchmarkRawTCP sends the same 32 KiB chunks over a plain loopback TCP
// connection to the same sink: the ceiling BenchmarkRelay is compared with.
func BenchmarkRawTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	peer, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	done := sink(peer)
	data := make([]byte, chunk)

	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	conn.(*net.TCPConn).CloseWrite()
	var total int64
	select {
	case total = <-done:
	case <-time.After(time.Minute):
		b.Fatal("sink did not finish")
	}
	b.StopTimer()

	if want := int64(b.N) * chunk; total != want {
		b.Fatalf("sink got %d bytes; want %d", total, want)
	}
}
