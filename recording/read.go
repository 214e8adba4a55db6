package recording

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Audit actions of watching recordings.
const (
	ActionPlay     = "recording-play"
	ActionDownload = "recording-download"
)

// List returns the recordings f matches, newest first.
func (s *Store) List(ctx context.Context, f vdi.RecordingFilter) ([]vdi.Recording, error) {
	return s.db.Recordings(ctx, f)
}

// Get returns recording id; a vdi.ENotFound error when there is none (an
// id that is not a session id never is).
func (s *Store) Get(ctx context.Context, id string) (vdi.Recording, error) {
	if !validID.MatchString(id) {
		return vdi.Recording{}, notFound(id)
	}
	r, err := s.db.Recording(ctx, id)
	if errors.Is(err, vdi.ErrNotFound) {
		return r, notFound(id)
	}
	return r, err
}

// Open returns recording id and its file for by, and writes action
// (ActionPlay, ActionDownload) with detail to the audit log first:
// nobody watches unrecorded. The caller closes the file.
func (s *Store) Open(ctx context.Context, by vdi.Identity, id, action, detail string) (vdi.Recording, *os.File, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return r, nil, err
	}
	if err := s.Watched(ctx, by, r, action, detail); err != nil {
		return r, nil, err
	}
	f, err := os.Open(s.path(r.ID, r.Format))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil, vdi.Errorf(vdi.ENotFound, "It may have been recorded by another portal replica, or removed by hand.",
			"The file of recording %s is not on this portal.", id)
	} else if err != nil {
		return r, nil, fmt.Errorf("recording: %w", err)
	}
	return r, f, nil
}

// Watched writes to the audit log that by watched (or downloaded) r.
func (s *Store) Watched(ctx context.Context, by vdi.Identity, r vdi.Recording, action, detail string) error {
	d := "recording " + r.ID + " of " + r.Login
	if detail != "" {
		d += "; " + detail
	}
	return s.db.Record(ctx, vdi.AuditEvent{Actor: by.Login, Action: action, Namespace: r.Namespace, Target: r.Member, Detail: d})
}

func notFound(id string) error {
	return vdi.Errorf(vdi.ENotFound, "Pick one from the list of recordings.", "There is no recording %q.", id)
}

// Recorded returns which of the session ids have a recording.
func (s *Store) Recorded(ctx context.Context, ids []string) (map[string]bool, error) {
	return s.db.Recorded(ctx, ids)
}
