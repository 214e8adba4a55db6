package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"reflect"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The host fence keeps desktops' network stacks off the host. A desktop
// of an outbound pool reaches the network through pasta, which opens its
// connections on the host as the desktop's uid; pasta keeps the host's
// loopback out, but the kernel delivers locally whatever is addressed to
// any other address of the host (a second NIC, docker0, a tailnet, the
// link-local address of eth0, reached even by listeners on [::]). So a
// root portal installs an nftables table of its own: in the output hook,
// before NAT (a docker port published on a host address is refused, not
// rewritten), a packet of a socket owned by a desktop uid whose
// destination the host's routing calls local, broadcast, anycast or
// multicast is refused: a TCP connection attempt with a reset, anything
// else (UDP, ICMP, other protocols) with "administratively prohibited".
// The routing lookup is the kernel's at the time of the packet, so the
// fence holds for addresses the host gains later. Replies of a desktop's
// own listeners (a VM's loopback consoles, which the portal opens) are
// not attempts and pass.
//
// A portal that is not root would run pasta as its own uid, which no rule
// can tell from the portal's: its desktops get no outbound network at all
// (errNoFence; the log and doctor say so).

// rtnLocal and rtnMulticast bound the route types the fence refuses:
// RTN_LOCAL, RTN_BROADCAST, RTN_ANYCAST and RTN_MULTICAST, which follow
// each other.
const (
	rtnLocal     = unix.RTN_LOCAL
	rtnMulticast = unix.RTN_MULTICAST
)

// HostFence is the nftables table of one portal's desktop uids.
type HostFence struct {
	first, last int
	owner       string // the portal's local folder
}

// NewHostFence returns the fence of the desktop uids first to last of
// the portal whose local backend's folder is owner.
func NewHostFence(first, last int, owner string) *HostFence {
	return &HostFence{first: first, last: last, owner: owner}
}

// Table names the fence's table: one per portal (its uid range and
// folder), so a portal restarting replaces its own, and two portals on one
// host (sharing a range, or not) never remove each other's.
func (f *HostFence) Table() string {
	h := fnv.New32a()
	owner, err := filepath.Abs(f.owner)
	if err != nil {
		owner = f.owner
	}
	h.Write([]byte(owner))
	return fmt.Sprintf("corral_vdi_%d_%d_%08x", f.first, f.last, h.Sum32())
}

func (f *HostFence) table() *nftables.Table {
	return &nftables.Table{Name: f.Table(), Family: nftables.TableFamilyINet}
}

func (f *HostFence) chain(t *nftables.Table) *nftables.Chain {
	return &nftables.Chain{Name: "desktops_out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRaw, Policy: ptr(nftables.ChainPolicyAccept)}
}

func ptr[T any](v T) *T { return &v }

// Install replaces the fence's table (a table left by an earlier portal
// included) in one transaction: no moment without it, never two.
func (f *HostFence) Install() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("host fence: %w", err)
	}
	t := f.table()
	c.AddTable(t) // so the delete never fails on a first start
	c.DelTable(t)
	c.AddTable(t)
	ch := c.AddChain(f.chain(t))
	for _, r := range f.rules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("host fence: install nftables table inet %s: %w", f.Table(), err)
	}
	return nil
}

// Remove deletes the fence's table; a table already gone is no error.
func (f *HostFence) Remove() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("host fence: %w", err)
	}
	c.DelTable(f.table())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("host fence: remove nftables table inet %s: %w", f.Table(), err)
	}
	return nil
}

// Check reports whether the fence is in place: its table, its chain on
// the output hook and exactly its rules. The error says what differs.
func (f *HostFence) Check() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("host fence: %w", err)
	}
	t := f.table()
	ch, err := c.ListChain(t, f.chain(t).Name)
	if err != nil {
		return fmt.Errorf("no nftables chain inet %s %s (%v)", f.Table(), f.chain(t).Name, err)
	}
	if ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookOutput || ch.Type != nftables.ChainTypeFilter {
		return fmt.Errorf("nftables chain inet %s %s is not a filter chain on the output hook", f.Table(), ch.Name)
	}
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return fmt.Errorf("nftables rules of inet %s: %w", f.Table(), err)
	}
	want := f.rules()
	if len(rules) != len(want) {
		return fmt.Errorf("nftables chain inet %s %s has %d rules; want %d", f.Table(), ch.Name, len(rules), len(want))
	}
	for i, r := range rules {
		if !reflect.DeepEqual(r.Exprs, readable(want[i])) {
			return fmt.Errorf("nftables chain inet %s %s: rule %d is not the fence's", f.Table(), ch.Name, i+1)
		}
	}
	return nil
}

// readable drops from rule what the nftables library does not read
// back (byteorder).
func readable(rule []expr.Any) []expr.Any {
	var out []expr.Any
	for _, e := range rule {
		if _, ok := e.(*expr.Byteorder); !ok {
			out = append(out, e)
		}
	}
	return out
}

// rules are the fence's rules: `meta skuid FIRST-LAST fib daddr type
// local-multicast` then `tcp flags & (syn|ack) == syn reject with tcp
// reset`, or `meta l4proto != tcp reject with icmpx admin-prohibited`.
func (f *HostFence) rules() [][]expr.Any {
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	hton := &expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4}
	match := []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		hton,
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: be32(uint32(f.first)), ToData: be32(uint32(f.last))},
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		hton,
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: be32(rtnLocal), ToData: be32(rtnMulticast)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
	}
	tcp := append(append([]expr.Any{}, match...),
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	)
	other := append(append([]expr.Any{}, match...),
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	)
	return [][]expr.Any{tcp, other}
}
