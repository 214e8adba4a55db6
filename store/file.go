package store

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// A SQLite database deleted (or replaced) under a running portal goes on
// working on the open, unlinked file, with no error anywhere, and is gone
// when the portal restarts. So the portal remembers which file it opened
// and says so, loudly, once the path no longer names it.

// dbFile is the SQLite file a DB opened: its path and inode.
type dbFile struct {
	path     string
	dev, ino uint64
}

// watchFile remembers the file at path; nil when it cannot be read.
func watchFile(path string) *dbFile {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil
	}
	return &dbFile{path: path, dev: st.Dev, ino: st.Ino}
}

// FileGone returns why the SQLite file this DB opened is no longer at its
// path (deleted, or replaced by another file); nil while it is, and for
// PostgreSQL.
func (db *DB) FileGone() error {
	f := db.file
	if f == nil {
		return nil
	}
	var st syscall.Stat_t
	err := syscall.Stat(f.path, &st)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the database file %s was deleted while the portal runs", f.path)
	case err != nil:
		return nil // unreadable is not gone; writes will say what is wrong
	case st.Dev != f.dev || st.Ino != f.ino:
		return fmt.Errorf("the database file %s was replaced by another file while the portal runs", f.path)
	}
	return nil
}

// fileGoneText is what the pages say of a FileGone error.
func fileGoneText(err error) string {
	return "Warning: " + err.Error() + ". The portal goes on writing to the file it opened, which nothing else can read and which is lost when the portal stops (history, and on the local backend its pools and claims): restore the file from a backup and restart the portal, or restart it to begin a new database."
}
