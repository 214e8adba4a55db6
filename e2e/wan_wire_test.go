package e2e

import (
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// wire is a network emulator in user space between two TUN devices: what
// one side's kernel sends is read as IP packets, dropped at the profile's
// loss rate, serialised at its bit rate behind a bounded queue, held for
// half its round trip, and written into the other side's kernel. It is
// netem's delay, loss and rate for kernels without sch_netem (this
// machine's has tbf but no netem), and the same code on every machine, so
// the figures compare. The TCP connections across it are the kernel's
// own, with their real congestion control and retransmissions.
type wire struct {
	mu sync.Mutex
	q  wanProfile
	// noUDP drops every UDP packet, as a firewall that lets only TCP
	// through (a WebRTC track's port unreachable).
	noUDP bool
	// udp counts the UDP bytes (IP packets, headers included) carried
	// towards the namespace ([0]) and back ([1]), and kinds the same by
	// what they carry (udpKind).
	udp   [2]int64
	kinds [2]map[string]int64
	// packets counts the UDP packets each way by what they carry.
	packets [2]map[string]int64
}

// blockUDP makes the wire drop every UDP packet, or carry them again.
func (w *wire) blockUDP(on bool) {
	w.mu.Lock()
	w.noUDP = on
	w.mu.Unlock()
}

// udpBytes returns the UDP bytes carried towards the namespace (the
// portal's, to the browser) and back.
func (w *wire) udpBytes() (toNS, fromNS int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.udp[0], w.udp[1]
}

// udpKinds returns the UDP bytes carried towards the namespace so far,
// by what they carry (udpKind).
func (w *wire) udpKinds() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.kinds[0])
}

// udpPackets returns how many UDP packets carrying kind (udpKind) went
// towards the namespace so far, and back.
func (w *wire) udpPackets(kind string) (toNS, fromNS int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.packets[0][kind], w.packets[1][kind]
}

// udpKind names what an IPv4 UDP packet carries: on a WebRTC port, STUN
// (ICE checks and consent), DTLS or RTP/RTCP, told apart by the
// payload's first byte (RFC 7983), and RTCP from RTP by its packet type
// (RFC 5761: 192-223).
func udpKind(ip []byte) string {
	at := int(ip[0]&0x0f)*4 + 8 // past the IP and UDP headers
	if len(ip) < at+2 {
		return "other"
	}
	b := ip[at]
	switch {
	case b <= 3:
		return "stun"
	case b >= 20 && b <= 63:
		return "dtls"
	case b >= 128 && b <= 191 && ip[at+1] >= 192 && ip[at+1] <= 223:
		return "rtcp"
	case b >= 128 && b <= 191:
		return "rtp"
	}
	return "other"
}

// wireQueue is the most bytes waiting to be sent in one direction, like
// netem's default limit of 1000 packets.
const wireQueue = 1000 * 1500

// set changes the profile; packets already in flight keep theirs.
func (w *wire) set(q wanProfile) {
	w.mu.Lock()
	w.q = q
	w.mu.Unlock()
}

// openTUN creates TUN device name (IP packets, no extra header) and returns
// it non-blocking, so a Close ends a Read blocked on it.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// carry moves packets from one TUN device to another until either closes;
// dir is 0 from the host's to the namespace's, 1 back.
func (w *wire) carry(from, to *os.File, dir int) {
	type packet struct {
		b  []byte
		at time.Time
	}
	out := make(chan packet, 4096)
	defer close(out)
	go func() {
		for p := range out {
			if d := time.Until(p.at); d > 0 {
				time.Sleep(d)
			}
			to.Write(p.b)
		}
	}()
	var busy time.Time // when the link has sent what is queued
	buf := make([]byte, 65536)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		udp := n > 20 && buf[0]>>4 == 4 && buf[9] == unix.IPPROTO_UDP
		w.mu.Lock()
		q, blocked := w.q, udp && w.noUDP
		if udp && !blocked {
			w.udp[dir] += int64(n)
			if w.kinds[dir] == nil {
				w.kinds[dir], w.packets[dir] = map[string]int64{}, map[string]int64{}
			}
			kind := udpKind(buf[:n])
			w.kinds[dir][kind] += int64(n)
			w.packets[dir][kind]++
		}
		w.mu.Unlock()
		if blocked {
			continue
		}
		now := time.Now()
		if q.Loss > 0 && rand.Float64()*100 < q.Loss {
			continue
		}
		at := now
		if q.Mbit > 0 {
			if busy.Before(now) {
				busy = now
			}
			if busy.Sub(now) > time.Duration(wireQueue*8/q.Mbit)*time.Microsecond {
				continue // the queue is full: tail drop
			}
			busy = busy.Add(time.Duration(n*8/q.Mbit) * time.Microsecond)
			at = busy
		}
		at = at.Add(time.Duration(q.RTT) * time.Millisecond / 2)
		select {
		case out <- packet{append([]byte(nil), buf[:n]...), at}:
		default: // the delay line is full
		}
	}
}
