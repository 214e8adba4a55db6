package portal

import (
	"net"
	"testing"
)

// BenchmarkLocalSocketOwner measures what every new connection costs the
// listener: one lookup in the kernel's socket table.
func BenchmarkLocalSocketOwner(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer server.Close()
	from, _ := tcpAddrPort(server.RemoteAddr())
	to, _ := tcpAddrPort(server.LocalAddr())
	for b.Loop() {
		if _, found, err := localSocketOwner(from, to); err != nil || !found {
			b.Fatalf("lookup: found %v, %v", found, err)
		}
	}
}
