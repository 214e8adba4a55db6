package views

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestHome_StoppedDesktopTile: a stopped or failed desktop's tile offers
// its way back as a form (never a GET), in its pool's terms, instead of
// Open; a running one offers Open.
func TestHome_StoppedDesktopTile(t *testing.T) {
	for _, c := range []struct {
		name      string
		power     vdi.Power
		mode      vdi.Mode
		want      string // the start button's text; "" for Open
		wantFresh bool
	}{
		{"failed ephemeral", vdi.PowerFailed, vdi.ModeEphemeral, "Get a fresh desktop", true},
		{"failed persistent", vdi.PowerFailed, vdi.ModePersistent, "Start it again", false},
		{"stopped persistent", vdi.PowerStopped, vdi.ModePersistent, "Start it again", false},
		{"running", vdi.PowerRunning, vdi.ModeEphemeral, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "demo-1", Pool: "demo", Power: c.power}, Mode: c.mode, Holder: "ann"}
			doc := mustParse(t, render(t, Home(HomeProps{Page: Page{Asset: func(p string) string { return "/static/" + p }}, Desktops: []vdi.Desktop{d}})))
			start, open := byTestID(doc, "start-again"), byTestID(doc, "open")
			if c.want == "" {
				if len(start) != 0 || len(open) != 1 {
					t.Fatalf("start buttons %d, Open %d; want 0, 1", len(start), len(open))
				}
				return
			}
			if len(start) != 1 || len(open) != 0 {
				t.Fatalf("start buttons %d, Open %d; want 1, 0", len(start), len(open))
			}
			if got := strings.TrimSpace(text(start[0])); got != c.want {
				t.Errorf("button = %q; want %q", got, c.want)
			}
			form := start[0].Parent
			if m, _ := attr(form, "method"); m != "post" {
				t.Errorf("the button's form method = %q; want post", m)
			}
			if a, _ := attr(form, "action"); a != "/desktops/local/demo-1/start" {
				t.Errorf("the button's form action = %q", a)
			}
			fresh := findAll(form, hasAttrs("name", "fresh", "value", "1"))
			if (len(fresh) == 1) != c.wantFresh {
				t.Errorf("fresh=1 fields: %d; want fresh %v", len(fresh), c.wantFresh)
			}
		})
	}
}
