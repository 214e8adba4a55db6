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

// dialSocket connects to the desktop's Unix socket at path, as
// dialUnixAs does for its user.
func (d *Desktop) dialSocket(ctx context.Context, path string) (net.Conn, error) {
	c, err := dialUnixAs(ctx, path, d.spec.User)
	if err != nil {
		return nil, fmt.Errorf("local: desktop %q: %w", d.spec.Name, err)
	}
	return c, nil
}

// dialUnixAs connects to the Unix socket at path that u's processes made.
// With a nil u (a desktop of the portal's own user) it simply dials; else
// path must be a socket, not a symlink, owned by u's uid. A QEMU member
// run as its uid dials its VNC and serial sockets the same way.
func dialUnixAs(ctx context.Context, path string, u *DesktopUser) (net.Conn, error) {
	var dialer net.Dialer
	if u == nil {
		return dialer.DialContext(ctx, "unix", path)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != u.UID {
		return nil, fmt.Errorf("%s is not a socket of uid %d: refusing it", path, u.UID)
	}
	return dialer.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
