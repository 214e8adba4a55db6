package views

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"golang.org/x/net/html"
)

// TestPages_MainAndHeading: the console, kiosk and player pages each have
// one <main> landmark and an <h1>, and no table header cell is empty.
func TestPages_MainAndHeading(t *testing.T) {
	page := Page{Title: "t", User: vdi.Identity{Login: "ann"}, Asset: func(p string) string { return "/static/" + p }}
	d := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "demo-1", Pool: "demo", Power: vdi.PowerRunning, Protocols: []vdi.Protocol{vdi.ProtocolVNC}}, Holder: "ann"}
	rec := RecordingRow{ID: "r1", Login: "ann", Namespace: "local", Member: "demo-1", Protocol: "vnc", StartedAt: time.Unix(1_800_000_000, 0)}
	for name, out := range map[string]string{
		"console":    render(t, Console(ConsoleProps{Page: page, Desktop: d, ConnectURL: "/c", DesktopURL: "/d"})),
		"kiosk":      render(t, Kiosk(KioskProps{Page: page, Pool: "demo", Desktop: "demo-1", ConnectURL: "/c", ReleaseURL: "/r"})),
		"kiosk-wait": render(t, Kiosk(KioskProps{Page: page, Pool: "demo", Msg: "m", Hint: "h"})),
		"player":     render(t, Playback(PlaybackProps{Page: page, Recording: rec, FileURL: "/f", Back: "/history"})),
		"recordings": render(t, Recordings(RecordingsProps{Page: page, Recordings: []RecordingRow{rec}})),
	} {
		doc := mustParse(t, out)
		if name != "recordings" {
			if n := len(findAll(doc, func(n *html.Node) bool { return n.Data == "main" })); n != 1 {
				t.Errorf("%s: %d <main> elements; want 1", name, n)
			}
			if n := len(findAll(doc, func(n *html.Node) bool { return n.Data == "h1" })); n < 1 {
				t.Errorf("%s: no <h1>", name)
			}
		}
		for _, th := range findAll(doc, func(n *html.Node) bool { return n.Data == "th" }) {
			if strings.TrimSpace(text(th)) == "" {
				t.Errorf("%s: an empty <th>", name)
			}
		}
	}
}
