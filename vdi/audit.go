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

// protectKey marks a context whose audit rows are an admin's.
type protectKey struct{}

// Protect returns ctx marked as an admin's request: every audit row
// written for it is kept like the protected actions (an audit log that
// buffers through an outage never sheds it).
func Protect(ctx context.Context) context.Context {
	return context.WithValue(ctx, protectKey{}, true)
}

// Protected reports whether ctx was marked by Protect.
func Protected(ctx context.Context) bool {
	v, _ := ctx.Value(protectKey{}).(bool)
	return v
}
