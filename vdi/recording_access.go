package vdi

import "context"

// ErrRecordingRefused is the one refusal of a recording to a non-admin,
// whatever the reason (another's, an unknown id, a pool that does not
// allow it), so that ids cannot be probed.
func ErrRecordingRefused() error {
	return Errorf(EForbidden, "Ask an admin to play it back, or to let users play their own recordings of this pool.",
		"Only admins may play back this recording.")
}

// MayPlayRecording says whether id may play back (or download) a recording
// of login's session on the desktop ref: admins always; the user whose
// session it was only while the desktop's pool has OwnRecordings on.
// Nobody else, whatever the pool says.
func (s *Service) MayPlayRecording(ctx context.Context, id Identity, login string, ref Ref) error {
	if id.Admin {
		return nil
	}
	refuse := ErrRecordingRefused()
	if login != id.Login {
		return refuse
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return refuse // a desktop since removed: its pool's rule is gone with it
	}
	p, err := s.backend.Pool(ctx, m.Namespace, m.Pool)
	if err != nil || !p.Policy.Record || !p.Policy.OwnRecordings {
		return refuse
	}
	return nil
}
