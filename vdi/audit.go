package vdi

import "context"

// AuditEvent is one thing the audit log records: who did what to which desktop.
type AuditEvent struct {
	Actor     string
	Action    string // e.g. claim, release, force-release, start, stop
	Namespace string
	Target    string
	Detail    string
}

// AuditLog records audit events.
type AuditLog interface {
	Record(ctx context.Context, e AuditEvent) error
}
