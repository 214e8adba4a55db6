package views

import "time"

// The history and recordings pages take rows of their own, so that the
// storage can change without touching the pages; handlers fill them.

// SessionRow is one console session on the history page.
type SessionRow struct {
	ID, Login, Namespace, Member string
	Protocol, Path               string    // console protocol; relay path: direct, peer or apiserver
	OpenedAt, ClosedAt           time.Time // ClosedAt is zero while open
	BytesIn, BytesOut            int64
	CloseReason                  string
	LastInput                    time.Time // zero when no user input was seen
}

// endReason is why a session ended in a user's words: the portal's
// internal words for a console that simply closed (its context canceled,
// nothing) read "closed"; admins' history keeps the raw reason.
func endReason(reason string) string {
	switch reason {
	case "", "context canceled", "EOF":
		return "closed"
	}
	return reason
}

// AuditRow is one line of the audit log on the history page.
type AuditRow struct {
	At                                       time.Time
	Actor, Action, Namespace, Target, Detail string
}

// PruneNote is what retention last removed, for the history page.
type PruneNote struct {
	At             time.Time
	Audit, Session int64
}

// RecordingRow is one recorded console session.
type RecordingRow struct {
	ID, Login, Namespace, Member, Protocol string
	StartedAt, EndedAt                     time.Time // EndedAt is zero while recording
	Bytes                                  int64
}
