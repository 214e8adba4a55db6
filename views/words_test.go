package views

import (
	"strings"
	"testing"
)

// TestRecordingNotice_SaysWhoWatches: the notice names who may watch a
// recording back: the user too where the pool lets users play their own.
func TestRecordingNotice_SaysWhoWatches(t *testing.T) {
	for _, c := range []struct {
		input, own bool
		want, not  string
	}{
		{false, false, "Admins can watch it back.", "You"},
		{true, true, "You (in My sessions) and admins can watch it back.", "Admins can"},
	} {
		got := render(t, RecordingNotice(c.input, c.own))
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("RecordingNotice(%v, %v) = %q; want %q, not %q", c.input, c.own, got, c.want, c.not)
		}
	}
}

// TestEndReason: a console that simply closed reads "closed", never the
// portal's internal words.
func TestEndReason(t *testing.T) {
	for in, want := range map[string]string{"context canceled": "closed", "": "closed", "released": "released"} {
		if got := endReason(in); got != want {
			t.Errorf("endReason(%q) = %q; want %q", in, got, want)
		}
	}
}
