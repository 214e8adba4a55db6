package connid

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// HostPrefixes lists what the kernel delivers to this host beyond
// loopback: its routes of type local, in every table (isHostAddr's
// answer, for whole prefixes). They are each address of an interface,
// and any prefix routed as local without an address record (`ip route add
// local 198.18.0.0/15 dev lo`), which a process of the host may bind and
// connect from all the same.
func HostPrefixes() ([]HostPrefix, error) {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETROUTE, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink: dump routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("netlink: routes: %w", err)
	}
	var out []HostPrefix
	for _, m := range msgs {
		// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
		// scope, type, flags.
		if m.Header.Type != unix.RTM_NEWROUTE || len(m.Data) < unix.SizeofRtMsg || m.Data[7] != unix.RTN_LOCAL {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, fmt.Errorf("netlink: route attributes: %w", err)
		}
		var hp HostPrefix
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.RTA_DST:
				if addr, ok := netip.AddrFromSlice(a.Value); ok {
					hp.Prefix = netip.PrefixFrom(addr.Unmap(), int(m.Data[1]))
				}
			case unix.RTA_OIF:
				if len(a.Value) == 4 {
					if ifi, err := net.InterfaceByIndex(int(binary.NativeEndian.Uint32(a.Value))); err == nil {
						hp.Dev = ifi.Name
					}
				}
			}
		}
		if hp.Prefix.IsValid() && !hp.Prefix.Addr().IsLoopback() {
			out = append(out, hp)
		}
	}
	return out, nil
}
