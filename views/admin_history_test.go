package views

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// TestHistory_CellsNamedOnAPhone: on a phone the history's tables stack
// each row's cells and hide their heads (app.css), so every cell names
// its column (data-label, shown before it) as its head does: "288 / 40525"
// or two times one under the other said nothing.
func TestHistory_CellsNamedOnAPhone(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	doc := mustParse(t, render(t, History(HistoryProps{Page: Page{Asset: func(p string) string { return p }},
		Sessions: []SessionRow{{ID: "s1", Login: "alice", Namespace: "local", Member: "demo-1", Protocol: "vnc", Path: "direct",
			OpenedAt: now, ClosedAt: now.Add(time.Minute), BytesIn: 288, BytesOut: 40525, CloseReason: "closed"}},
		Audit: []AuditRow{{At: now, Actor: "boss", Action: "claim", Namespace: "local", Target: "demo-1", Detail: "pool demo"}}})))
	for _, id := range []string{"sessions", "audit"} {
		tables := findAll(doc, func(n *html.Node) bool { v, _ := attr(n, "data-testid"); return n.Data == "table" && v == id })
		if len(tables) != 1 {
			t.Fatalf("the history has %d tables %q; want 1", len(tables), id)
		}
		var heads []string
		for _, th := range findAll(tables[0], func(n *html.Node) bool { return n.Data == "th" }) {
			heads = append(heads, strings.TrimSpace(text(th)))
		}
		for _, tr := range findAll(tables[0], func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }) {
			cells := findAll(tr, func(n *html.Node) bool { return n.Data == "td" })
			if len(cells) != len(heads) {
				t.Fatalf("%s: a row has %d cells under %d heads", id, len(cells), len(heads))
			}
			for i, td := range cells {
				if got, _ := attr(td, "data-label"); got != heads[i] {
					t.Errorf("%s: cell %d (%q) is labelled %q; want its column's %q", id, i, strings.TrimSpace(text(td)), got, heads[i])
				}
			}
		}
	}
}
