package views

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestAdmin_MemberActionsWaitForTheJob: while a pool's job runs, every
// member's Recreate (the server answers 409) is disabled and says why;
// the member a recreate works on takes no Start or Assign either; other
// members' Start and Assign stay; with the job over, all are back.
func TestAdmin_MemberActionsWaitForTheJob(t *testing.T) {
	member := func(name string) AdminMember {
		return AdminMember{MemberStatus: vdi.MemberStatus{Desktop: vdi.Desktop{Member: vdi.Member{Namespace: "ns", Name: name, Pool: "desk", Power: vdi.PowerStopped}}}}
	}
	props := func(job *vdi.Job) AdminProps {
		pool := vdi.PoolStatus{Pool: vdi.Pool{Namespace: "ns", Name: "desk", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Size: 2}, Job: job}
		return AdminProps{Page: Page{Title: "Pools", Asset: func(p string) string { return "/static/" + p }}, Now: time.Unix(1_800_000_000, 0),
			Pools: []AdminPool{{PoolDashboard: vdi.PoolDashboard{PoolStatus: pool}, Members: []AdminMember{member("desk-1"), member("desk-2")}}}}
	}
	button := func(t *testing.T, p AdminProps, desktop, action string) (disabled bool, title string) {
		t.Helper()
		rows := findAll(mustParse(t, render(t, AdminLive(p))), hasAttrs("data-desktop", "ns/"+desktop))
		if len(rows) != 1 {
			t.Fatalf("%d rows of %s; want 1", len(rows), desktop)
		}
		bs := findAll(rows[0], hasAttrs("data-testid", action))
		if len(bs) != 1 {
			t.Fatalf("%d %s buttons on %s; want 1", len(bs), action, desktop)
		}
		_, disabled = attr(bs[0], "disabled")
		title, _ = attr(bs[0], "title")
		return disabled, title
	}
	running := props(&vdi.Job{Kind: vdi.JobRecreate, Namespace: "ns", Pool: "desk", Member: "desk-2", State: vdi.JobRunning, Progress: "cloning", By: "ops", Total: 1})
	for _, tc := range []struct {
		desktop, action string
		disabled        bool
		why             string
	}{
		{"desk-1", "recreate", true, "Recreate wait until it ends"},
		{"desk-1", "start", false, ""},
		{"desk-1", "assign", false, ""},
		{"desk-2", "recreate", true, "Recreate wait until it ends"},
		{"desk-2", "start", true, "takes no start or assign until it is fresh"},
		{"desk-2", "assign", true, "takes no start or assign until it is fresh"},
	} {
		disabled, title := button(t, running, tc.desktop, tc.action)
		if disabled != tc.disabled || !strings.Contains(title, tc.why) || (tc.disabled && !strings.Contains(title, "Recreating desk-2 (ops) is under way (cloning)")) {
			t.Errorf("%s of %s during a recreate of desk-2: disabled %v, title %q; want disabled %v saying %q", tc.action, tc.desktop, disabled, title, tc.disabled, tc.why)
		}
	}
	done := props(&vdi.Job{Kind: vdi.JobRecreate, Namespace: "ns", Pool: "desk", Member: "desk-2", State: vdi.JobDone, By: "ops", Total: 1, Done: 1})
	for _, action := range []string{"recreate", "start", "assign"} {
		if disabled, _ := button(t, done, "desk-2", action); disabled {
			t.Errorf("%s of desk-2 after its recreate ended is disabled; want it back", action)
		}
	}
}
