package kube

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestDirectDialer checks that a direct console's socket gives up on a peer
// that vanished without a FIN: unacknowledged data after
// DirectUserTimeout (TCP_USER_TIMEOUT), and keepalive probes while idle.
func TestDirectDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := directDialer.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var timeout, keepalive, idle int
	raw.Control(func(fd uintptr) {
		timeout, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		keepalive, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		idle, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	})
	if time.Duration(timeout)*time.Millisecond != DirectUserTimeout || keepalive != 1 || idle <= 0 || time.Duration(idle)*time.Second > DirectUserTimeout {
		t.Errorf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d, TCP_KEEPIDLE %d s; want %v, on, and probes within it", timeout, keepalive, idle, DirectUserTimeout)
	}
}

// TestVMIPlaceMoved: a direct console is closed when its VMI is gone, made
// anew, has another IP or has completed a migration, and kept while a
// migration runs (the guest is still where it reaches it).
func TestVMIPlaceMoved(t *testing.T) {
	vmi := func(uid, ip string, mig *kubevirtv1.VirtualMachineInstanceMigrationState) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{}}
		v.UID = types.UID(uid)
		v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: ip, IPs: []string{ip}}}
		v.Status.MigrationState = mig
		return v
	}
	running := &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m1"}
	done := &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "m1", Completed: true}
	place := placeOf(vmi("u1", "10.0.0.5", nil), "10.0.0.5")
	deleting := vmi("u1", "10.0.0.5", nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, tc := range []struct {
		name  string
		now   *kubevirtv1.VirtualMachineInstance
		moved bool
	}{
		{"same", vmi("u1", "10.0.0.5", nil), false},
		{"migrating", vmi("u1", "10.0.0.5", running), false},
		{"migrated", vmi("u1", "10.0.0.5", done), true},
		{"new IP", vmi("u1", "10.0.0.9", nil), true},
		{"new VMI", vmi("u2", "10.0.0.5", nil), true},
		{"gone", nil, true},
		{"deleting", deleting, true},
	} {
		if why := place.moved(tc.now); (why != "") != tc.moved {
			t.Errorf("%s: moved %q; want moved %v", tc.name, why, tc.moved)
		}
	}
	if why := placeOf(vmi("u1", "10.0.0.9", done), "10.0.0.9").moved(vmi("u1", "10.0.0.9", done)); why != "" {
		t.Errorf("a console dialed after a migration completed: moved %q; want kept", why)
	}
}
