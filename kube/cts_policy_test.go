package kube

import (
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

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
