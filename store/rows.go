package store

import "github.com/corral-dev/corral-vdi-portal/vdi"

// The rows store keeps are the domain's types (package vdi); these names
// let its SQL code read plainly.
type (
	Session         = vdi.Session
	AuditEntry      = vdi.AuditEntry
	HistoryFilter   = vdi.HistoryFilter
	Pruned          = vdi.Pruned
	Recording       = vdi.Recording
	RecordingFilter = vdi.RecordingFilter
	Token           = vdi.Token
)
