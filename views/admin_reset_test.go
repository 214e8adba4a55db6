package views

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestAdmin_ResettingMember: a member being reset after its claim ended
// shows as resetting (why, and no holder), takes no action (each would be
// refused), and its pool counts it apart from free and claimed.
func TestAdmin_ResettingMember(t *testing.T) {
	pool := vdi.PoolStatus{Pool: vdi.Pool{Namespace: "ns", Name: "desk", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Size: 2}, Free: 1, Resetting: 1}
	resetting := AdminMember{MemberStatus: vdi.MemberStatus{Desktop: vdi.Desktop{Member: vdi.Member{Namespace: "ns", Name: "desk-1", Pool: "desk", Power: vdi.PowerStopping},
		Resetting: vdi.RuleIdle}}}
	free := AdminMember{MemberStatus: vdi.MemberStatus{Desktop: vdi.Desktop{Member: vdi.Member{Namespace: "ns", Name: "desk-2", Pool: "desk", Power: vdi.PowerStopped}}}}
	p := AdminProps{Page: Page{Title: "Pools", Asset: func(p string) string { return "/static/" + p }}, Now: time.Unix(1_800_000_000, 0),
		Pools: []AdminPool{{PoolDashboard: vdi.PoolDashboard{PoolStatus: pool}, Members: []AdminMember{resetting, free}}}}
	doc := mustParse(t, render(t, AdminLive(p)))
	if counts := text(findAll(doc, hasAttrs("data-testid", "pool-counts"))[0]); !strings.Contains(counts, "1 free · 0 claimed · 1 resetting") {
		t.Errorf("pool counts %q; want 1 free, 0 claimed, 1 resetting", counts)
	}
	row := findAll(doc, hasAttrs("data-desktop", "ns/desk-1"))[0]
	if got := text(findAll(row, hasAttrs("data-testid", "holder"))[0]); !strings.Contains(got, "resetting") || !strings.Contains(got, "reclaimed: no input") {
		t.Errorf("holder cell of the member being reset: %q; want resetting, reclaimed: no input", got)
	}
	for _, action := range []string{"start", "stop", "release", "assign", "recreate"} {
		if n := len(findAll(row, hasAttrs("data-testid", action))); n != 0 {
			t.Errorf("%d %s buttons on the member being reset; want none", n, action)
		}
	}
	other := findAll(doc, hasAttrs("data-desktop", "ns/desk-2"))[0]
	if len(findAll(other, hasAttrs("data-testid", "resetting"))) != 0 || len(findAll(other, hasAttrs("data-testid", "assign"))) != 1 {
		t.Error("the free member shows as resetting or takes no assign")
	}
}
