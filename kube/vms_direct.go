package kube

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A direct console path is TCP to a VMI's IP, which a live migration moves
// and a node's loss takes away without a FIN: a plain socket then waits
// for minutes (the kernel's retransmissions) or, idle, for ever. So the
// socket gives up on data unacknowledged for DirectUserTimeout
// (TCP_USER_TIMEOUT) and probes an idle peer (keepalives, dead after
// about DirectUserTimeout too), and the VMI cache closes it as soon as the
// VMI it was dialed at is gone, has another IP, or has migrated: the page
// reconnects, once. A console
// reads no deadline of its own: an idle desktop rightly sends nothing.

// DirectUserTimeout is how long a direct console's data may go
// unacknowledged, and an idle peer unanswered, before the socket ends.
const DirectUserTimeout = 10 * time.Second

// directDialer is the dialer of direct console paths.
var directDialer = net.Dialer{
	Timeout:         DirectUserTimeout,
	KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 4 * time.Second, Interval: 2 * time.Second, Count: 3},
	Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(DirectUserTimeout.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	},
}

// vmiPlace is where a direct console was dialed: the VMI and how it ran.
type vmiPlace struct {
	uid       string
	ip        string
	migration string // the VMI's last completed migration, "" for none
	rv        string // the resourceVersion of the VMI the console was dialed from
}

// placeOf returns where vmi runs, for a console dialed at ip.
func placeOf(vmi *kubevirtv1.VirtualMachineInstance, ip string) vmiPlace {
	return vmiPlace{uid: string(vmi.UID), ip: ip, migration: migrated(vmi), rv: vmi.ResourceVersion}
}

// migrated returns vmi's last completed migration, or "". While a
// migration runs the guest is still where the console reaches it; once it
// completes the guest runs on the target, behind another socket.
func migrated(vmi *kubevirtv1.VirtualMachineInstance) string {
	if m := vmi.Status.MigrationState; m != nil && m.Completed {
		return string(m.MigrationUID)
	}
	return ""
}

// moved says why a console dialed at place no longer reaches the VMI
// that vmi (nil: gone) is now, or "".
func (p vmiPlace) moved(vmi *kubevirtv1.VirtualMachineInstance) string {
	switch {
	case vmi == nil || vmi.DeletionTimestamp != nil:
		return "its VirtualMachineInstance is gone"
	case string(vmi.UID) != p.uid:
		return "its VirtualMachineInstance was made anew"
	case migrated(vmi) != p.migration:
		return "its VM migrated to another node"
	}
	for _, iface := range vmi.Status.Interfaces {
		for _, ip := range reported(iface) {
			if ip == p.ip {
				return ""
			}
		}
	}
	return "its VirtualMachineInstance no longer has the IP " + p.ip
}

// watchMoves closes conn, dialed at place for ref, once the VMI cache
// shows that the VMI moved (see vmiPlace.moved); it returns conn wrapped
// so that closing it ends the watch. Without a VMI cache conn is returned
// as it is: the socket's own timeouts still apply.
func (a *addresses) watchMoves(ref vdi.Ref, place vmiPlace, conn net.Conn) net.Conn {
	if a.vmis == nil {
		return conn
	}
	ctx, cancel := context.WithCancel(context.Background())
	watched := &watchedConn{Conn: conn, stop: cancel}
	go func() {
		// Only what the cache shows at or after the dial counts: a cache
		// behind the API server (the dial may have read past it) must not
		// close a good console.
		caughtUp := false
		for {
			changed := a.vmis.next()
			if st := a.vmis.store(ref.Namespace); st != nil {
				var vmi *kubevirtv1.VirtualMachineInstance
				if o, ok, _ := st.GetByKey(ref.Namespace + "/" + ref.Name); ok {
					vmi = o.(*kubevirtv1.VirtualMachineInstance)
					caughtUp = caughtUp || vmi.UID != types.UID(place.uid) || !newer(place.rv, vmi.ResourceVersion)
				}
				if why := place.moved(vmi); caughtUp && why != "" {
					slog.Info("direct console closed: the desktop moved", "desktop", ref, "why", why)
					if vmi != nil && vmi.DeletionTimestamp == nil && string(vmi.UID) == place.uid {
						// The same VMI elsewhere (a live migration, a new
						// IP): the page says so and reconnects to it.
						watched.moved.Store(relay.HandedOver(DesktopMoves))
					}
					conn.Close()
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return watched
}

// DesktopMoves is the close reason of a direct console whose VM moved
// under it (a live migration, a new IP): the page says it as it
// reconnects to the desktop where it is now.
const DesktopMoves = "your desktop moved to another node (a live migration)"

// watchedConn is a direct console whose VMI is watched until it closes.
type watchedConn struct {
	net.Conn
	once  sync.Once
	stop  context.CancelFunc
	moved atomic.Value // the error reads end with once the VM moved
}

// Read implements net.Conn; once the watch closed the connection because
// the VM moved, a failed read says so (relay.HandedOver).
func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if moved, _ := c.moved.Load().(error); moved != nil {
			return n, moved
		}
	}
	return n, err
}

// Close implements net.Conn.
func (c *watchedConn) Close() error {
	c.once.Do(c.stop)
	return c.Conn.Close()
}
