package kube

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestParsePolicy_Console(t *testing.T) {
	p := vdi.Policy{DisconnectGrace: time.Minute, Clipboard: vdi.ClipboardToDesktop, FileTransfer: vdi.FileTransferOf(false)}
	got, err := parsePolicy(formatPolicy(p))
	if err != nil || got.Console() != p.Console() || got.DisconnectGrace != time.Minute {
		t.Errorf("parsePolicy(formatPolicy(%+v)) = %+v, %v; want it back", p, got, err)
	}
	if s := formatPolicy(vdi.Policy{}); s != "{}" {
		t.Errorf("formatPolicy of the defaults = %s; want {}", s)
	}
	if _, err := parsePolicy(`{"clipboard":"sideways"}`); err == nil {
		t.Error("clipboard sideways accepted; want an error")
	}
}

// TestPolicyRecordRoundTrip checks that a CT pool's ConfigMap keeps the
// recording switches next to the reclaim timers.
func TestPolicyRecordRoundTrip(t *testing.T) {
	want := vdi.Policy{IdleTimeout: time.Hour, Record: true, RecordInput: true}
	s := formatPolicy(want)
	got, err := parsePolicy(s)
	if err != nil {
		t.Fatalf("parsePolicy(%s): %v", s, err)
	}
	if got != want {
		t.Errorf("parsePolicy(formatPolicy(%+v)) = %+v; want it back (%s)", want, got, s)
	}
	if got, _ := parsePolicy(`{"record": true}`); !got.Record || got.RecordInput {
		t.Errorf(`parsePolicy({"record": true}) = %+v; want Record only`, got)
	}
}

// TestPolicyEveryFieldRoundTrip checks that a pool's ConfigMap keeps every
// policy field (the watch policy was once dropped on the way).
func TestPolicyEveryFieldRoundTrip(t *testing.T) {
	want := vdi.Policy{DisconnectGrace: time.Minute, MaxSession: 8 * time.Hour, IdleTimeout: time.Hour,
		Clipboard: vdi.ClipboardFromDesktop, FileTransfer: vdi.FileTransferOf(false), Audio: vdi.ToggleOf(false),
		Record: true, RecordInput: true, OwnRecordings: true, Watch: vdi.WatchConsent, Network: vdi.NetworkOutbound}
	// Every field set: a field added to vdi.Policy and not kept fails here.
	if v := reflect.ValueOf(want); slices.ContainsFunc(reflect.VisibleFields(v.Type()), func(f reflect.StructField) bool { return v.FieldByIndex(f.Index).IsZero() }) {
		t.Fatalf("the round trip's policy %+v leaves a field unset", want)
	}
	s := formatPolicy(want)
	if got, err := parsePolicy(s); err != nil || got != want {
		t.Errorf("parsePolicy(%s) = %+v, %v; want %+v", s, got, err, want)
	}
	if _, err := parsePolicy(`{"watch":"always"}`); err == nil {
		t.Error("watch always accepted; want an error")
	}
	if _, err := parsePolicy(`{"network":"host"}`); err == nil {
		t.Error("network host accepted; want an error")
	}
}
