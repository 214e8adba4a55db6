package handlers

import (
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// sessionRows, auditRows and recordingRows turn what the store keeps into
// what the pages show.
func sessionRows(in []vdi.Session) []views.SessionRow {
	out := make([]views.SessionRow, len(in))
	for i, s := range in {
		out[i] = views.SessionRow{ID: s.ID, Login: s.Login, Namespace: s.Namespace, Member: s.Member, Protocol: s.Protocol, Path: s.Path,
			OpenedAt: s.OpenedAt, ClosedAt: s.ClosedAt, BytesIn: s.BytesIn, BytesOut: s.BytesOut, CloseReason: s.CloseReason, LastInput: s.LastInput}
	}
	return out
}

func auditRows(in []vdi.AuditEntry) []views.AuditRow {
	out := make([]views.AuditRow, len(in))
	for i, e := range in {
		out[i] = views.AuditRow{At: e.At, Actor: e.Actor, Action: e.Action, Namespace: e.Namespace, Target: e.Target, Detail: e.Detail}
	}
	return out
}

func recordingRow(r vdi.Recording) views.RecordingRow {
	return views.RecordingRow{ID: r.ID, Login: r.Login, Namespace: r.Namespace, Member: r.Member, Protocol: r.Protocol,
		StartedAt: r.StartedAt, EndedAt: r.EndedAt, Bytes: r.Bytes}
}

func recordingRows(in []vdi.Recording) []views.RecordingRow {
	out := make([]views.RecordingRow, len(in))
	for i, r := range in {
		out[i] = recordingRow(r)
	}
	return out
}
