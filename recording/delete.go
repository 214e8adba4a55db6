package recording

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ActionDelete is the audit action of an admin deleting a recording.
const ActionDelete = "recording-delete"

// Delete removes recording id for admin by: the audit row first (nobody
// deletes unrecorded), then the file and its metadata. A recording still
// being written is refused: its session would go on unrecorded.
func (s *Store) Delete(ctx context.Context, by vdi.Identity, id string) error {
	if !by.Admin {
		return vdi.Errorf(vdi.EForbidden, "Ask an admin to delete it.", "Only admins delete recordings.")
	}
	r, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.EndedAt.IsZero() {
		return vdi.Errorf(vdi.EConflict, "End the session first (release the desktop or close its console), then delete the recording.",
			"Recording %s is still being written.", id)
	}
	if err := s.db.Record(ctx, vdi.AuditEvent{Actor: by.Login, Action: ActionDelete, Namespace: r.Namespace, Target: r.Member,
		Detail: fmt.Sprintf("recording %s of %s, %d bytes", r.ID, r.Login, r.Bytes)}); err != nil {
		return err
	}
	if err := os.Remove(s.path(r.ID, r.Format)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("recording: delete %s: %w", r.ID, err)
	}
	if err := s.db.DeleteRecording(ctx, r.ID); err != nil {
		return err
	}
	s.freed(r)
	s.log.Info("recording deleted", "recording", r.ID, "by", by.Login, "user", r.Login, "bytes", r.Bytes)
	return nil
}
