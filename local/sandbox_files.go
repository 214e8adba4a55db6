package local

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Root's writes into a folder a desktop's uid owns (its run folder) go
// through a descriptor of that folder, opened without following a
// symlink (the folders above it are the portal's, so only names inside
// are the user's), and name exactly one new entry in it: openat2 with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, O_CREAT|O_EXCL after unlinkat
// of whatever was there. A symlink or hard link the user planted is
// removed, never written through; the new file is handed to the uid by
// its descriptor.

// openDirNoFollow opens the folder dir itself for *at calls.
func openDirNoFollow(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dir, err)
	}
	return fd, nil
}

// resolveBeneath confines an openat2 to one name in its folder.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// writeFileIn writes data as a new file name (mode 0600) in dir, handed to
// u (nil: kept the portal's).
func writeFileIn(dir, name string, data []byte, u *DesktopUser) error {
	dfd, err := openDirNoFollow(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s/%s: %w", dir, name, err)
	}
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: resolveBeneath,
	})
	if err != nil {
		return fmt.Errorf("create %s/%s: %w", dir, name, err)
	}
	f := os.NewFile(uintptr(fd), dir+"/"+name)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if u != nil {
		if err := f.Chown(u.UID, u.GID); err != nil {
			return err
		}
	}
	return f.Close()
}

// mkdirIn makes the folder name (mode 0700) in dir, handed to u, unless
// a folder of u's is there already; anything else there is refused.
func mkdirIn(dir, name string, u *DesktopUser) error {
	dfd, err := openDirNoFollow(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdir %s/%s: %w", dir, name, err)
	}
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: resolveBeneath,
	})
	if err != nil {
		return fmt.Errorf("open %s/%s: %w", dir, name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if u == nil {
		return nil
	}
	if int(st.Uid) != u.UID && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s/%s belongs to uid %d: refusing it", dir, name, st.Uid)
	}
	return unix.Fchown(fd, u.UID, u.GID)
}
