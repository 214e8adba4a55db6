package connid

import (
	"net"
	"syscall"
	"testing"
)

// BenchmarkClassify_BusyHost measures what classifying one loopback
// connection costs while 30,000 other loopback sockets are open (the
// table read it replaces took 5 ms, then 80 ms per connection with that
// many): the sock_diag lookup is by 4-tuple, so it does not grow.
func BenchmarkClassify_BusyHost(b *testing.B) {
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	if want := uint64(31000); lim.Cur < want {
		raised := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)} // root may raise the hard limit
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) != nil {
			raised.Cur, raised.Max = lim.Max, lim.Max
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised)
		}
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	others := min(15000, int(lim.Cur-200)/2) // each a client and a server socket: 30,000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range others {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatalf("after %d sockets: %v", len(held), err)
		}
		held = append(held, c, <-accepted)
	}
	server := held[len(held)-1]
	from, _ := tcpAddrPort(server.RemoteAddr())
	to, _ := tcpAddrPort(server.LocalAddr())
	c := New(Config{})
	for b.Loop() {
		if v := c.classifyTCP(from, to); v.Kind != Host {
			b.Fatalf("classify: %+v", v)
		}
	}
	b.ReportMetric(float64(2*others), "sockets")
}
