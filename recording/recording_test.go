package recording_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testmount"
	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The history database is what recordings keep their metadata in.
var _ recording.DB = (*store.DB)(nil)

func mustStore(tb testing.TB, db *store.DB, dir string, max int64) *recording.Store {
	tb.Helper()
	s, err := recording.Open(context.Background(), recording.Config{Dir: dir, DB: db, MaxBytes: max})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustDB(tb testing.TB) *store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "portal.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

var ref = vdi.Ref{Namespace: "local", Name: "rec-1"}

func TestStore(t *testing.T) {
	ctx := context.Background()
	admin := vdi.Identity{Login: "root", Admin: true}

	t.Run("OK", func(t *testing.T) {
		db, dir := mustDB(t), filepath.Join(t.TempDir(), "recordings")
		s := mustStore(t, db, dir, 0)
		rs, err := s.Start(ctx, "0123456789abcdef", "alice", ref, vdi.ProtocolTerminal, false)
		if err != nil {
			t.Fatal(err)
		}
		rs.Output([]byte("hello\r\n"))
		if err := rs.Close(ctx); err != nil {
			t.Fatal(err)
		}
		r, f, err := s.Open(ctx, admin, "0123456789abcdef", recording.ActionDownload, "")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		info, _ := f.Stat()
		if info.Mode().Perm() != 0o600 || r.Bytes != info.Size() || r.EndedAt.IsZero() || r.Format != relay.FormatAsciicast {
			t.Errorf("recording %+v, file mode %v size %d; want 0600, finished, its size recorded", r, info.Mode(), info.Size())
		}
		if d, _ := os.Stat(dir); d.Mode().Perm() != 0o700 {
			t.Errorf("directory mode %v; want 0700", d.Mode())
		}
		audit, _ := db.AuditLog(ctx, 10)
		if len(audit) != 1 || audit[0].Action != recording.ActionDownload || audit[0].Actor != "root" {
			t.Errorf("audit = %+v; want root's download", audit)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		s := mustStore(t, mustDB(t), t.TempDir(), 0)
		for _, id := range []string{"../portal.db", "0123456789abcdef", "", "ABCDEF0123456789"} {
			if _, _, err := s.Open(ctx, admin, id, recording.ActionDownload, ""); vdi.ErrorCode(err) != vdi.ENotFound {
				t.Errorf("Open(%q) = %v; want not found", id, err)
			}
		}
	})

	t.Run("ErrFull", func(t *testing.T) {
		db := mustDB(t)
		s, err := recording.Open(ctx, recording.Config{Dir: t.TempDir(), DB: db, MaxBytes: 200, UserMaxBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Start(ctx, "00000000000000aa", "alice", ref, vdi.ProtocolTerminal, false)
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for i := 0; i < 20 && werr == nil; i++ {
			werr = rs.Output([]byte("0123456789"))
		}
		if !errors.Is(werr, recording.ErrFull) {
			t.Fatalf("Output past the cap = %v; want ErrFull", werr)
		}
		rs.Close(ctx)
		r, _ := db.Recording(ctx, "00000000000000aa")
		if r.Bytes > 200 || r.Bytes == 0 {
			t.Errorf("recording bytes = %d; want what fitted under 200", r.Bytes)
		}
		full := mustStore(t, db, t.TempDir(), r.Bytes) // a restart with the cap where the recordings are
		if _, err := full.Start(ctx, "00000000000000bb", "alice", ref, vdi.ProtocolVNC, false); vdi.ErrorCode(err) != vdi.EUnavailable {
			t.Errorf("Start on full recordings = %v; want unavailable", err)
		}
	})

	// The disk of the recordings fills up (a small tmpfs) far below the
	// cap: a session ends before the disk is down to its reserve (the
	// database lives there too), and a new recorded console is refused,
	// not started to end at once.
	t.Run("DiskReserve", func(t *testing.T) {
		dir := t.TempDir()
		testmount.Tmpfs(t, dir, "4m")
		db := mustDB(t)
		s, err := recording.Open(ctx, recording.Config{Dir: dir, DB: db, Reserve: 2 << 20})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Start(ctx, "00000000000000dd", "alice", ref, vdi.ProtocolTerminal, false)
		if err != nil {
			t.Fatal(err)
		}
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		var werr error
		for i := 0; i < 200 && werr == nil; i++ {
			werr = rs.Output(chunk)
		}
		if !errors.Is(werr, recording.ErrDiskReserve) {
			t.Fatalf("Output on a nearly full disk = %v; want ErrDiskReserve", werr)
		}
		rs.Close(ctx)
		if free := freeBytes(t, dir); free < 1<<20 {
			t.Errorf("free space after the session ended: %d bytes; want about the 2 MiB reserve kept", free)
		}
		if r, _ := db.Recording(ctx, "00000000000000dd"); r.Bytes == 0 {
			t.Errorf("recording %+v; want what fitted kept", r)
		}
		if _, err := s.Start(ctx, "00000000000000ee", "alice", ref, vdi.ProtocolTerminal, false); vdi.ErrorCode(err) != vdi.EUnavailable ||
			!strings.Contains(err.Error(), "nearly full") {
			t.Errorf("Start on a nearly full disk = %v; want unavailable, saying so", err)
		}
	})

	// A reserve larger than the disk (any machine, no mount): the
	// database's disk (DBDir) keeps it too, so nothing is recorded.
	t.Run("DBDiskReserve", func(t *testing.T) {
		s, err := recording.Open(ctx, recording.Config{Dir: t.TempDir(), DB: mustDB(t), DBDir: t.TempDir(), Reserve: 1 << 62})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Start(ctx, "00000000000000ef", "alice", ref, vdi.ProtocolTerminal, false); vdi.ErrorCode(err) != vdi.EUnavailable {
			t.Errorf("Start with the disk below its reserve = %v; want unavailable", err)
		}
	})

	t.Run("Recover", func(t *testing.T) {
		db, dir := mustDB(t), t.TempDir()
		s := mustStore(t, db, dir, 0)
		rs, err := s.Start(ctx, "00000000000000cc", "alice", ref, vdi.ProtocolTerminal, false)
		if err != nil {
			t.Fatal(err)
		}
		rs.Output([]byte("before the crash"))
		// The portal dies mid-event: no Close, a partial line at the end.
		f, _ := os.OpenFile(filepath.Join(dir, "00000000000000cc.cast"), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`[1.5, "o", "cut sh`)
		f.Close()
		mustStore(t, db, dir, 0) // the next start
		r, err := db.Recording(ctx, "00000000000000cc")
		b, _ := os.ReadFile(filepath.Join(dir, "00000000000000cc.cast"))
		if err != nil || r.EndedAt.IsZero() || r.Bytes != int64(len(b)) || !strings.HasSuffix(string(b), "\"before the crash\"]\n") {
			t.Errorf("after restart: %+v, %v, file %q; want closed at its last complete event", r, err, b)
		}
	})

	t.Run("Retention", func(t *testing.T) {
		db, dir := mustDB(t), t.TempDir()
		now := time.Now()
		s, _ := recording.Open(ctx, recording.Config{Dir: dir, DB: db, Retention: time.Hour, Now: func() time.Time { return now }})
		rs, _ := s.Start(ctx, "00000000000000dd", "alice", ref, vdi.ProtocolSerial, false)
		rs.Close(ctx)
		now = now.Add(2 * time.Hour)
		if n, err := s.PruneOnce(ctx); err != nil || n != 1 {
			t.Errorf("PruneOnce = %d, %v; want 1", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "00000000000000dd.cast")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file after pruning: %v; want gone", err)
		}
		if used, _ := s.Used(); used != 0 {
			t.Errorf("Used after pruning = %d; want 0", used)
		}
	})
}
