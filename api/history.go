package api

import "time"

// Session is a console session as GET /api/vdi/history/sessions lists it.
type Session struct {
	ID          string    `json:"id"`
	User        string    `json:"user"`
	Namespace   string    `json:"namespace"`
	Desktop     string    `json:"desktop"`
	Protocol    string    `json:"protocol"`
	Path        string    `json:"path"`
	Opened      time.Time `json:"opened"`
	Closed      time.Time `json:"closed,omitzero"`
	BytesIn     int64     `json:"bytesIn"`
	BytesOut    int64     `json:"bytesOut"`
	LastInput   time.Time `json:"lastInput,omitzero"`
	CloseReason string    `json:"closeReason,omitempty"`
}

// AuditEntry is an audit log entry as GET /api/vdi/history/audit lists it.
type AuditEntry struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	Action    string    `json:"action"`
	Namespace string    `json:"namespace,omitempty"`
	Target    string    `json:"target,omitempty"`
	Detail    string    `json:"detail,omitempty"`
}
