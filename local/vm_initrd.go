package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cavaliergopher/cpio"
)

// The guest's root password reaches it inside its initramfs, never on a
// command line: QEMU's arguments (and so the kernel's) are readable by
// every process on the host in /proc. Each boot gets the image's initramfs
// with a small uncompressed cpio archive appended (the kernel unpacks
// concatenated archives in order) that holds the password's crypt hash at
// vmHashPath, which the image's init writes into /etc/shadow.

const (
	vmInitrdName = "initrd"
	vmHashPath   = "etc/corral/root.hash"
)

// writeVMInitrd writes dir/initrd: img's initramfs followed by an archive
// holding hash, readable by the member's own uid (user, or the portal's
// when nil) only.
func writeVMInitrd(dir string, img VMImage, hash string, user *DesktopUser) (string, error) {
	base, err := os.Open(img.Initrd)
	if err != nil {
		return "", err
	}
	defer base.Close()
	path := filepath.Join(dir, vmInitrdName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	n, err := io.Copy(f, base)
	if err == nil {
		// The kernel looks for an uncompressed archive only at offsets
		// that are multiples of 4, skipping zeros to get there.
		_, err = f.Write(make([]byte, (4-n%4)%4))
	}
	if err != nil {
		f.Close()
		return "", err
	}
	if err := appendHashArchive(f, hash); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := user.give(tmp); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// appendHashArchive writes a newc cpio archive with the folders of
// vmHashPath and the hash file in it.
func appendHashArchive(w io.Writer, hash string) error {
	cw := cpio.NewWriter(w)
	for _, d := range []string{"etc", "etc/corral"} {
		if err := cw.WriteHeader(&cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755}); err != nil {
			return err
		}
	}
	body := []byte(hash + "\n")
	if err := cw.WriteHeader(&cpio.Header{Name: vmHashPath, Mode: cpio.TypeReg | 0o600, Size: int64(len(body))}); err != nil {
		return err
	}
	if _, err := cw.Write(body); err != nil {
		return err
	}
	return cw.Close()
}

// vmPassword returns a fresh random password and its SHA-512 crypt hash,
// made by busybox's mkpasswd (the same code the guest checks it with). The
// password goes to mkpasswd on its standard input, not its command line.
func vmPassword(ctx context.Context) (password, hash string, err error) {
	b := make([]byte, 9)
	rand.Read(b)
	password = hex.EncodeToString(b)
	salt := make([]byte, 6)
	rand.Read(salt)
	cmd := exec.CommandContext(ctx, "busybox", "mkpasswd", "-m", "sha512", "-S", hex.EncodeToString(salt), "-P", "0")
	cmd.Stdin = strings.NewReader(password + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	hash = strings.TrimSpace(string(out))
	if err == nil && !strings.HasPrefix(hash, "$6$") {
		err = fmt.Errorf("unexpected output %q", hash)
	}
	if err != nil {
		return "", "", fmt.Errorf("hash VM password (busybox mkpasswd; install busybox-static): %w %s", err, strings.TrimSpace(stderr.String()))
	}
	return password, hash, nil
}
