package views

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
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

// TestWhoami_ShowsTheLogin: the header names the user by the login the
// pages use for people (invitations, who watches), beside a display name
// that differs ("Alice" and "alice" are both shown, never only one).
func TestWhoami_ShowsTheLogin(t *testing.T) {
	for _, c := range []struct{ name, login, want string }{
		{"Alice", "alice", "Alice (alice)"},
		{"alice", "alice", "alice"},
		{"", "bob", "bob"},
	} {
		page := Page{User: vdi.Identity{Login: c.login, Name: c.name}, Asset: func(p string) string { return "/static/" + p }}
		doc := mustParse(t, render(t, Home(HomeProps{Page: page})))
		who := byTestID(doc, "whoami")
		if len(who) != 1 {
			t.Fatalf("%d whoami elements", len(who))
		}
		if got := strings.Join(strings.Fields(text(who[0])), " "); got != c.want {
			t.Errorf("name %q, login %q: whoami = %q; want %q", c.name, c.login, got, c.want)
		}
	}
}
