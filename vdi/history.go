package vdi

import "time"

// Session is one console connection of a desktop's holder or an admin, as
// the session history keeps it.
type Session struct {
	ID          string
	Login       string
	Namespace   string
	Member      string
	Protocol    string
	Path        string // relay path taken: direct, peer or apiserver
	OpenedAt    time.Time
	ClosedAt    time.Time // zero while open
	BytesIn     int64     // client to desktop
	BytesOut    int64     // desktop to client
	CloseReason string
	LastInput   time.Time // zero when no user input was seen
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID int64
	At time.Time
	AuditEvent
}

// HistoryFilter narrows session history and audit queries; zero fields
// match everything.
type HistoryFilter struct {
	// User is a login: the session's user, or the audit event's actor or
	// the holder it names.
	User string
	// Targets are member (and pool) names, e.g. every member of one pool.
	// A non-nil empty slice matches nothing.
	Targets []string
	// Since and Until bound the time (opened, for sessions), Until excluded.
	Since, Until time.Time
	// Limit caps the rows returned, newest first; 0 means 1000.
	Limit int
}

// Pruned says what retention last removed.
type Pruned struct {
	At             time.Time
	Audit, Session int64
}

// Recording is the metadata of one recorded console session; its file
// lives under the data dir's recordings/, named by ID.
type Recording struct {
	ID        string // the session's id
	Login     string
	Namespace string
	Member    string
	Protocol  string
	Format    string // relay.FormatAsciicast or relay.FormatRFB
	StartedAt time.Time
	EndedAt   time.Time // zero while recording
	Bytes     int64
}

// RecordingFilter narrows a list of recordings; zero fields match
// everything.
type RecordingFilter struct {
	Namespace, Member string
	User              string
	// Since and Until bound the start, Until excluded.
	Since, Until time.Time
	// Limit caps the rows returned, newest first; 0 means 1000.
	Limit int
}
