package local

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// A sandboxed desktop's sockets live in its run folder, which its uid
// owns: the user may replace vnc.sock with a symlink to another member's
// socket, and the portal, as root, would follow it. So the portal opens the
// socket's inode itself (O_PATH, no symlink followed; the folders above run
// are the portal's, so only the last name is the user's), checks it is a
// socket of the member's uid, and connects through /proc/self/fd, which
// names that very inode.

// dialSocket connects to the desktop's Unix socket at path. For a
// sandboxed desktop, path must be a socket (not a symlink) owned by its uid.
func (d *Desktop) dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var dialer net.Dialer
	if d.spec.User == nil {
		return dialer.DialContext(ctx, "unix", path)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("local: desktop %q: open %s: %w", d.spec.Name, path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("local: desktop %q: %s: %w", d.spec.Name, path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != d.spec.User.UID {
		return nil, fmt.Errorf("local: desktop %q: %s is not a socket of uid %d: refusing it", d.spec.Name, path, d.spec.User.UID)
	}
	return dialer.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
