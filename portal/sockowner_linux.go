package portal

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// localSocketOwner returns the uid owning the TCP socket on this host
// whose local address is from and whose remote address is to: for an
// accepted connection c, localSocketOwner(c.RemoteAddr(), c.LocalAddr())
// names the user whose process connected. found is false when no socket
// of this network namespace matches (the peer is on another host).
func localSocketOwner(from, to netip.AddrPort) (uid int, found bool, err error) {
	for _, f := range []struct {
		path string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		local, okL := procNetAddr(from, f.v6)
		remote, okR := procNetAddr(to, f.v6)
		if !okL || !okR {
			continue
		}
		uid, found, err := scanProcNet(f.path, local, remote)
		if err != nil || found {
			return uid, found, err
		}
	}
	return 0, false, nil
}

// scanProcNet finds the line of a /proc/net/tcp{,6} file with the given
// local and remote address columns and returns its uid column.
func scanProcNet(path, local, remote string) (int, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[1] != local || fields[2] != remote {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return 0, false, fmt.Errorf("%s: uid %q: %w", path, fields[7], err)
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// procNetAddr formats ap as /proc/net/tcp (v6 false) or tcp6 prints it:
// the address as 32-bit words in host byte order, in hex, then ":PORT".
// An IPv4 address is written as IPv4-mapped in the tcp6 form.
func procNetAddr(ap netip.AddrPort, v6 bool) (string, bool) {
	a := ap.Addr().Unmap()
	var b []byte
	switch {
	case !v6 && a.Is4():
		b4 := a.As4()
		b = b4[:]
	case v6:
		b16 := a.As16() // IPv4 comes out IPv4-mapped
		b = b16[:]
	default:
		return "", false
	}
	var sb strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&sb, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	fmt.Fprintf(&sb, ":%04X", ap.Port())
	return sb.String(), true
}

// tcpAddrPort returns a's address and port, or false when a is not TCP.
func tcpAddrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return t.AddrPort(), true
}
