package recording_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/recording"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func freeBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		tb.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// One user records until their share is used: their next recorded
// console is refused saying what to do, the notice names them, and
// another user is still recorded. Deleting a recording frees the share.
func TestStore_UserShare(t *testing.T) {
	ctx := context.Background()
	db, dir := mustDB(t), t.TempDir()
	s, err := recording.Open(ctx, recording.Config{Dir: dir, DB: db, MaxBytes: 4000, UserMaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Start(ctx, "00000000000000a1", "mallory", ref, vdi.ProtocolTerminal, false)
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := 0; i < 200 && werr == nil; i++ {
		werr = rs.Output([]byte("0123456789"))
	}
	if !errors.Is(werr, recording.ErrUserShare) {
		t.Fatalf("Output past the share = %v; want ErrUserShare", werr)
	}
	rs.Close(ctx)
	_, err = s.Start(ctx, "00000000000000a2", "mallory", ref, vdi.ProtocolTerminal, false)
	if vdi.ErrorCode(err) != vdi.EUnavailable || !strings.Contains(err.Error(), "your share") {
		t.Errorf("mallory's next recorded console = %v; want unavailable, saying their share is used", err)
	}
	if n := s.Notice(); !strings.Contains(n, "mallory") {
		t.Errorf("Notice() = %q; want it to name mallory", n)
	}
	other, err := s.Start(ctx, "00000000000000b1", "alice", ref, vdi.ProtocolTerminal, false)
	if err != nil {
		t.Fatalf("alice's recorded console after mallory used their share: %v; want recorded", err)
	}
	if err := other.Output([]byte("alice is recorded")); err != nil {
		t.Errorf("alice's recording: %v", err)
	}
	other.Close(ctx)

	admin := vdi.Identity{Login: "ops", Admin: true}
	if err := s.Delete(ctx, vdi.Identity{Login: "mallory"}, "00000000000000a1"); vdi.ErrorCode(err) != vdi.EForbidden {
		t.Errorf("Delete by a non-admin = %v; want forbidden", err)
	}
	if err := s.Delete(ctx, admin, "00000000000000a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000a1.cast")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file after Delete: %v; want gone", err)
	}
	if n := s.Notice(); n != "" {
		t.Errorf("Notice() after the delete = %q; want none", n)
	}
	again, err := s.Start(ctx, "00000000000000a3", "mallory", ref, vdi.ProtocolTerminal, false)
	if err != nil {
		t.Fatalf("mallory after an admin deleted their recording: %v; want recorded", err)
	}
	if err := s.Delete(ctx, admin, "00000000000000a3"); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("Delete of a recording in progress = %v; want conflict", err)
	}
	again.Close(ctx)
	audit, _ := db.AuditLog(ctx, 10)
	if len(audit) == 0 || audit[0].Action != recording.ActionDelete || audit[0].Actor != "ops" || !strings.Contains(audit[0].Detail, "00000000000000a1") {
		t.Errorf("audit = %+v; want ops's delete of 00000000000000a1 first", audit)
	}
	if err := s.Delete(ctx, admin, "../portal.db"); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("Delete(../portal.db) = %v; want not found", err)
	}
}
