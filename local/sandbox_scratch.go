package local

import (
	"os"
	"path/filepath"
	"strconv"
)

// A desktop's /run, /var and /dev/shm are its scratch: where a root
// portal bounds the desktop's disk, one tmpfs of the bound for all its
// processes together (the member's scratch folder, mounted before the
// desktop starts, made afresh at each start), so a second process cannot
// add a bound of its own; elsewhere each process gets tmpfs mounts of its
// own of at most the bound each. /run/desktop, the member's run folder,
// is a tmpfs of the bound of its own (mounted by prepareSandboxDirs): it
// is on the data disk, which a desktop must never fill.

// memberScratchName is the folder in a member's folder that holds its
// scratch disk.
const memberScratchName = "scratch"

// scratchDirs are the folders of a desktop's scratch, by where its
// processes see them and their name on the scratch disk.
var scratchDirs = []struct{ inside, name string }{{"/run", "run"}, {"/var", "var"}, {"/dev/shm", "shm"}}

// scratchArgs returns bubblewrap's options for a process's scratch
// folders (after /dev is made).
func (m *memberNS) scratchArgs() []string {
	var a []string
	shared := m.scratch != "" && isMountpoint(m.scratch)
	for _, d := range scratchDirs {
		switch {
		case shared:
			a = append(a, "--bind", filepath.Join(m.scratch, d.name), d.inside)
		case m.disk > 0:
			a = append(a, "--size", strconv.FormatUint(m.disk, 10), "--tmpfs", d.inside)
		default:
			a = append(a, "--tmpfs", d.inside)
		}
	}
	return a
}

// freshScratch makes the member's scratch disk anew: where the portal
// bounds it (root, a disk bound), a tmpfs of the bound with the scratch
// folders, the uid's, and the mount points bubblewrap binds on them.
// Nothing of the uid runs any more, so nothing races it.
func (u *DesktopUser) freshScratch() error {
	m := u.ns
	if m.scratch == "" {
		return nil
	}
	if err := u.freshDisk(m.scratch); err != nil || !isMountpoint(m.scratch) {
		return err // unbounded: each process gets its own (scratchArgs)
	}
	for _, dir := range []string{"run/desktop", "var/tmp", "shm"} {
		if err := os.MkdirAll(filepath.Join(m.scratch, dir), 0o700); err != nil {
			return err
		}
	}
	for _, dir := range []string{"run", "run/desktop", "var", "var/tmp", "shm"} {
		if err := u.give(filepath.Join(m.scratch, dir)); err != nil {
			return err
		}
	}
	return nil
}

// freshDisk makes dir anew, empty and u's, with u's disk bound mounted on
// it where the portal bounds disks (mountDisk).
func (u *DesktopUser) freshDisk(dir string) error {
	if err := unmountDisk(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := u.give(dir); err != nil {
		return err
	}
	return u.mountDisk(dir)
}
