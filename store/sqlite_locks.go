package store

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SQLite lets one writer in at a time and makes the others wait in its busy
// handler, which sleeps 1, 2, 5, 10, 15, 20, 25... ms between tries: with
// many claimants at once the lock is free most of the time while they all
// sleep. So the portals sharing a database file queue for it themselves,
// in this file beside the database ("portal.db-lock"):
//
//   - writers: in a process, one at a time through a channel; across
//     processes, an flock(2) on the file, tried every few tens of
//     microseconds. A write that waits for longer than sqliteGateWait
//     goes on without the queue and is left to SQLite's busy timeout, so
//     the queue never makes a write fail that SQLite would have let
//     through, and correctness never rests on it: SQLite's own lock
//     still decides.
//   - users' claim locks (vdi.ClaimLocks): in a process, a channel per
//     user; across processes, an open-file-description lock on one byte
//     of the file at an offset hashed from the user. The kernel drops it
//     when a portal dies, so no lock is left to run out.
//
// Every process holds one descriptor of the file per database path, shared
// by its handles of that database.

// sqliteGateWait bounds how long a write queues before it goes on
// unqueued; it matches the busy timeout.
const sqliteGateWait = 10 * time.Second

// lockFile is one database file's locks in this process.
type lockFile struct {
	path   string
	refs   int // handles of the database open in this process
	f      *os.File
	writer chan struct{}

	mu    sync.Mutex
	users map[int64]*userLock
}

// userLock is one user's claim lock in this process.
type userLock struct {
	held chan struct{}
	refs int
}

var lockFiles = struct {
	sync.Mutex
	m map[string]*lockFile
}{m: map[string]*lockFile{}}

// openLockFile returns the locks of the database at dbPath, or nil when
// the lock file cannot be opened (then SQLite's own locking is all there is,
// and claim locks are Leases).
func openLockFile(dbPath string) *lockFile {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return nil
	}
	lockFiles.Lock()
	defer lockFiles.Unlock()
	if l := lockFiles.m[abs]; l != nil {
		l.refs++
		return l
	}
	f, err := os.OpenFile(abs+"-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	l := &lockFile{path: abs, refs: 1, f: f, writer: make(chan struct{}, 1), users: map[int64]*userLock{}}
	lockFiles.m[abs] = l
	return l
}

// close lets go of one handle's use of l.
func (l *lockFile) close() {
	if l == nil {
		return
	}
	lockFiles.Lock()
	defer lockFiles.Unlock()
	if l.refs--; l.refs == 0 {
		delete(lockFiles.m, l.path)
		l.f.Close()
	}
}

// poll calls try until it reports success, ctx ends or wait passed,
// sleeping a little longer each time (from 20 µs to 1 ms), and reports
// whether try succeeded.
func poll(ctx context.Context, wait time.Duration, try func() bool) bool {
	deadline := time.Now().Add(wait)
	pause := 20 * time.Microsecond
	for !try() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
	return true
}

// lockWriter queues for the database's write lock and returns the function
// that lets the next writer in. It fails only when ctx ends.
func (l *lockFile) lockWriter(ctx context.Context) (unlock func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	t := time.NewTimer(sqliteGateWait)
	defer t.Stop()
	select {
	case l.writer <- struct{}{}:
	case <-t.C:
		return func() {}, nil // unqueued: SQLite's busy timeout decides
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fd := int(l.f.Fd())
	locked := poll(ctx, sqliteGateWait, func() bool { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil })
	var once sync.Once
	return func() {
		once.Do(func() {
			if locked {
				unix.Flock(fd, unix.LOCK_UN)
			}
			<-l.writer
		})
	}, nil
}

// lockUser takes the claim lock named key, waiting until ctx ends, and
// returns the function that lets it go.
func (l *lockFile) lockUser(ctx context.Context, key string) (unlock func(), err error) {
	h := fnv.New64a()
	h.Write([]byte(key))
	off := 1 + int64(h.Sum64()&(1<<40-1)) // byte 0 is left alone

	l.mu.Lock()
	u := l.users[off]
	if u == nil {
		u = &userLock{held: make(chan struct{}, 1)}
		l.users[off] = u
	}
	u.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if u.refs--; u.refs == 0 {
			delete(l.users, off)
		}
		l.mu.Unlock()
	}

	select {
	case u.held <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	fd := l.f.Fd()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	if !poll(ctx, time.Hour, func() bool { return unix.FcntlFlock(fd, unix.F_OFD_SETLK, &lk) == nil }) {
		<-u.held
		release()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("store: a claim lock was held for an hour")
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			un := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
			unix.FcntlFlock(fd, unix.F_OFD_SETLK, &un)
			<-u.held
			release()
		})
	}, nil
}
