// Package recording keeps console recordings: one file per recorded
// session under a directory of the portal's own (the data dir's
// recordings/), 0600 and named by the session id, with its metadata in the
// portal's database next to the session history; a total size cap with a
// share per user (so one user cannot use up everyone's), free space kept on
// the disks of the recordings and the database, an age limit, deletion by
// admins, and recovery of recordings a stopped portal left open. The relay
// writes the files' contents (relay.Recorder); this package knows files,
// not HTTP or who may watch.
package recording

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Defaults for Config.
const (
	DefaultRetention = 720 * time.Hour
	DefaultMaxBytes  = 10 << 30
)

// DB is what the recordings need of the portal's database.
type DB interface {
	CreateRecording(ctx context.Context, r vdi.Recording) error
	FinishRecording(ctx context.Context, id string, end time.Time, bytes int64) error
	Recording(ctx context.Context, id string) (vdi.Recording, error)
	Recordings(ctx context.Context, f vdi.RecordingFilter) ([]vdi.Recording, error)
	UnfinishedRecordings(ctx context.Context) ([]vdi.Recording, error)
	ExpiredRecordings(ctx context.Context, before time.Time) ([]vdi.Recording, error)
	DeleteRecording(ctx context.Context, id string) error
	RecordingBytes(ctx context.Context) (int64, error)
	RecordingBytesByUser(ctx context.Context) (map[string]int64, error)
	Recorded(ctx context.Context, ids []string) (map[string]bool, error)
	vdi.AuditLog
}

// Config configures a Store.
type Config struct {
	// Dir holds the files; it is made 0700.
	Dir string
	DB  DB
	// MaxBytes caps all recordings together; zero means DefaultMaxBytes
	// and a negative value no cap. A session whose recording would go
	// beyond it ends.
	MaxBytes int64
	// UserMaxBytes is each user's share of MaxBytes: a user whose
	// recordings reach it has their recorded consoles refused while
	// everyone else's are still recorded. Zero means a quarter of
	// MaxBytes, a negative value no share.
	UserMaxBytes int64
	// Reserve is the free space kept on the disks of Dir and DBDir: a
	// recorded console is refused, or ends, before a disk has less, so
	// the database stays writable. Zero means DefaultReserve of each
	// disk; a negative value keeps only a minimum of 1 MiB.
	Reserve int64
	// DBDir is the folder of the portal's SQLite database, when it has
	// one; its disk keeps Reserve free too.
	DBDir string
	// Retention is how long recordings are kept; zero means
	// DefaultRetention and a negative value forever.
	Retention time.Duration
	Log       *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Store keeps the recordings. It is safe for concurrent use.
type Store struct {
	dir       string
	db        DB
	max       int64
	retention time.Duration
	log       *slog.Logger
	now       func() time.Time
	used      atomic.Int64 // bytes on disk, including recordings in progress
	full      atomic.Bool  // a recording hit the cap; cleared when pruning frees space
	disks     *disks

	share int64 // each user's share; negative: none
	mu    sync.Mutex
	users map[string]int64 // bytes per user, including recordings in progress
	over  map[string]bool  // users whose recordings reached their share
}

// Errors a recording's writes fail with, ending its session.
var (
	// ErrFull: all recordings together reached the size cap.
	ErrFull = errors.New("recordings reached their size cap")
	// ErrUserShare: the user's recordings reached their share of the cap.
	ErrUserShare = errors.New("this user's recordings reached their share of the size cap")
	// ErrDiskReserve: the disk is down to the space kept for the database.
	ErrDiskReserve = errors.New("the portal's disk is down to the space kept for its database")
)

// validID is what a session id looks like (see handlers' newID); anything
// else is no recording, so an id never walks out of the directory.
var validID = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// Open opens the recordings under cfg.Dir, closing those a stopped portal
// left open as playable files (cut at their last complete event).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{dir: cfg.Dir, db: cfg.DB, max: cfg.MaxBytes, share: cfg.UserMaxBytes, retention: cfg.Retention, log: cfg.Log, now: cfg.Now,
		over: map[string]bool{}}
	if s.max == 0 {
		s.max = DefaultMaxBytes
	}
	if s.share == 0 && s.max > 0 {
		s.share = s.max / 4
	} else if s.share == 0 || s.share > s.max && s.max > 0 {
		s.share = -1 // no cap, or a share above it: the cap alone bounds
	}
	if s.retention == 0 {
		s.retention = DefaultRetention
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	used, err := s.db.RecordingBytes(ctx)
	if err != nil {
		return nil, err
	}
	s.used.Store(used)
	if s.users, err = s.db.RecordingBytesByUser(ctx); err != nil {
		return nil, err
	}
	s.disks = newDisks(cfg.Reserve, s.dir, cfg.DBDir)
	return s, nil
}

// Used returns the bytes all recordings take, and the cap (negative: none).
func (s *Store) Used() (used, max int64) { return s.used.Load(), s.max }

// UserShare returns each user's share of the cap (negative: none).
func (s *Store) UserShare() int64 { return s.share }

// path returns the file of recording r.
func (s *Store) path(id, format string) string {
	ext := ".cast"
	if format == relay.FormatRFB {
		ext = ".rfb"
	}
	return filepath.Join(s.dir, id+ext)
}

// recover closes the recordings a stopped portal left open. One whose file
// is not here (another replica's, with a shared database) is left alone.
func (s *Store) recover(ctx context.Context) error {
	open, err := s.db.UnfinishedRecordings(ctx)
	if err != nil {
		return err
	}
	for _, r := range open {
		valid, last, err := repair(s.path(r.ID, r.Format), r.Format)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			s.log.Error("recover recording", "recording", r.ID, "err", err)
		}
		if err := s.db.FinishRecording(ctx, r.ID, r.StartedAt.Add(last), valid); err != nil {
			return err
		}
		s.log.Info("closed a recording left open", "recording", r.ID, "bytes", valid, "duration", last)
	}
	return nil
}

// repair cuts the file at path after its last complete event and returns
// its size then and the time of that event.
func repair(path, format string) (int64, time.Duration, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var valid int64
	var last time.Duration
	if format == relay.FormatRFB {
		_, valid, last, err = relay.ReadRFBRecording(f, nil)
	} else {
		valid, last, err = relay.ScanAsciicast(f)
	}
	if err != nil {
		return valid, last, err
	}
	return valid, last, f.Truncate(valid)
}

// Prune removes the recordings older than the retention, now and then
// hourly, until ctx ends.
func (s *Store) Prune(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := s.PruneOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("prune recordings", "err", err)
		} else if n > 0 {
			s.log.Info("pruned recordings", "recordings", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PruneOnce removes the finished recordings older than the retention and
// returns how many it removed.
func (s *Store) PruneOnce(ctx context.Context) (int, error) {
	if s.retention < 0 {
		return 0, nil
	}
	old, err := s.db.ExpiredRecordings(ctx, s.now().Add(-s.retention))
	if err != nil {
		return 0, err
	}
	for i, r := range old {
		if err := os.Remove(s.path(r.ID, r.Format)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return i, fmt.Errorf("recording: prune: %w", err)
		}
		if err := s.db.DeleteRecording(ctx, r.ID); err != nil {
			return i, err
		}
		s.freed(r)
	}
	return len(old), nil
}

// freed accounts for recording r's file being gone.
func (s *Store) freed(r vdi.Recording) {
	s.used.Add(-r.Bytes)
	s.full.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[r.Login] -= r.Bytes
	if s.share < 0 || s.users[r.Login] < s.share {
		delete(s.over, r.Login)
	}
}
