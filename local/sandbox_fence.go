package local

import (
	"errors"
	"fmt"
)

// FenceHost installs the host fence (hostfence.go) of a root portal's
// desktop uids, before any desktop's network starts or is adopted. If it
// cannot, desktops of outbound pools get only their own loopback (fail
// closed) and the error says why. A portal that is not root has no fence
// to install. dir is the local backend's folder, which names the fence.
func (s *Sandbox) FenceHost(dir string) error {
	f := s.Fence(dir)
	if f == nil {
		return nil
	}
	s.fence = f
	if err := f.Install(); err != nil {
		s.net = nil
		s.netErr = fmt.Errorf("outbound network for local desktops is off: %v: without it a desktop would reach every host address but loopback; the kernel needs nf_tables with fib and reject for inet (CONFIG_NFT_FIB_INET, CONFIG_NFT_REJECT_INET)", err)
		return s.netErr
	}
	return nil
}

// UnfenceHost removes the host fence; call it only once no desktop runs.
func (s *Sandbox) UnfenceHost() error {
	if s == nil || s.fence == nil {
		return nil
	}
	return s.fence.Remove()
}

// Fence returns the host fence of a root portal's desktop uids (dir is
// its local backend's folder), or nil when desktops run as the portal's
// own uid (which no rule can tell from the portal's).
func (s *Sandbox) Fence(dir string) *HostFence {
	if s == nil || !s.ownUIDs {
		return nil
	}
	return NewHostFence(s.first, s.last, dir)
}

// errNoFence is why a portal that is not root gives its desktops no
// outbound network: each desktop's pasta would open its connections as
// the portal's own uid, which no firewall rule can tell from the
// portal's, and the host's kernel delivers to its own listeners whatever
// is addressed to any host address but loopback.
var errNoFence = errors.New("outbound network for local desktops is off: the portal is not root, so each desktop's network stack (pasta) would open its connections as the portal's own uid, which no firewall rule can tell from the portal's, and desktops would reach every host address but loopback (a second NIC, docker0, a tailnet, eth0's link-local address): desktops get only their own loopback; run the portal as root (its desktops then get uids of their own, fenced off the host by nftables) to give outbound pools a network")
