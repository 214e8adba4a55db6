package local

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A desktop's uid has no account on the host. Inside its namespaces it
// gets one: passwd and group files made from the host's, with the member's
// entry first, bound over /etc/passwd and /etc/group, so that whoami,
// ls -l and the shell's prompt name the member and ~ is its home.

// passwdName and groupName are the account files in the member's folder.
const (
	passwdName = "passwd"
	groupName  = "group"
)

// writeAccount writes the member's passwd and group files into its
// folder, which is the portal's (0711: the desktop's uid reads them
// through it, and cannot replace them).
func (u *DesktopUser) writeAccount() error {
	m := u.ns
	if m == nil || m.dir == "" {
		return nil
	}
	if err := os.MkdirAll(m.dir, 0o711); err != nil {
		return err
	}
	uid, gid := strconv.Itoa(u.UID), strconv.Itoa(u.GID)
	passwd := accountFile("/etc/passwd", m.name+":x:"+uid+":"+gid+":"+m.name+":"+m.insideHome()+":/bin/bash\n", m.name, uid)
	group := accountFile("/etc/group", m.name+":x:"+gid+":\n", m.name, gid)
	if err := writeAtomic(filepath.Join(m.dir, passwdName), passwd); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(m.dir, groupName), group)
}

// accountFile returns first followed by the entries of the host's account
// file at path (name:x:id:...) that name neither name nor id.
func accountFile(path, first, name, id string) []byte {
	var b bytes.Buffer
	b.WriteString(first)
	f, err := os.Open(path)
	if err != nil {
		return b.Bytes()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 3 && (fields[0] == name || fields[2] == id) {
			continue
		}
		b.WriteString(sc.Text() + "\n")
	}
	return b.Bytes()
}

// writeAtomic replaces path, in a folder of the portal's, with a file of
// data readable by all.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
