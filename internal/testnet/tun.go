package testnet

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// tunDevice is the TUN device; a test of TunForAll replaces it.
var tunDevice = "/dev/net/tun"

// TunForAll makes the TUN device usable by every uid (0666, Debian's
// default; some containers give 0600), as desktops' network stacks
// (pasta, run as each desktop's uid) need for an outbound network; a
// portal that finds it closed gives its desktops no network, and the rows
// that check the host fence would then check nothing. It skips the test
// only where the machine has no TUN device (no tun module, or a container
// not given the device) and fails it where the device cannot be opened up.
func TunForAll(t testing.TB) {
	t.Helper()
	mustRoot(t)
	fi, err := os.Stat(tunDevice)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no %s: load the tun module (modprobe tun), or in a container pass the device in", tunDevice)
	}
	if err != nil {
		t.Fatalf("the TUN device: %v", err)
	}
	if mode := fi.Mode().Perm(); mode&0o006 != 0o006 {
		t.Logf("%s is %04o: making it 0666, Debian's default", tunDevice, mode)
		if err := os.Chmod(tunDevice, 0o666); err != nil {
			t.Fatalf("%s is %04o, which desktops' uids cannot open, and cannot be made 0666: %v", tunDevice, mode, err)
		}
	}
}
