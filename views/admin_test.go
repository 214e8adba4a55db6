package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// evil is put into every user-controlled field: pool and member names,
// user names, reasons, audit details, filters.
const evil = `"'><xss-tag onmouseover=alert(1)></script><script>alert(1)</script>`

// pages renders every page that shows user-controlled text with s in
// each such field.
func pages(s string) map[string]templ.Component {
	now := time.Unix(1_800_000_000, 0)
	page := Page{Title: s, User: vdi.Identity{Login: s, Name: s, Admin: true}, Asset: func(p string) string { return "/static/" + p }}
	d := vdi.Desktop{Member: vdi.Member{Namespace: s, Name: s, Pool: s, Power: vdi.PowerRunning, Reason: s,
		Protocols: []vdi.Protocol{vdi.ProtocolVNC}}, Holder: s, ClaimedAt: now, Reclaim: &vdi.Deadline{Rule: s, At: now.Add(time.Hour)}}
	pool := vdi.PoolStatus{Pool: vdi.Pool{Namespace: s, Name: s, Kind: vdi.Kind(s), Mode: vdi.Mode(s), Source: s, Size: 1}}
	running, failed := pool, pool
	running.Job = &vdi.Job{Kind: vdi.JobRecreate, Member: s, State: vdi.JobRunning, Progress: s, By: s, Done: 1, Total: 2}
	failed.Job = &vdi.Job{Kind: vdi.JobKind(s), State: vdi.JobFailed, Error: s, Hint: s, By: s}
	admin := AdminProps{Page: page, Now: now, Pools: []AdminPool{{PoolDashboard: vdi.PoolDashboard{PoolStatus: failed}}, {
		PoolDashboard: vdi.PoolDashboard{PoolStatus: running},
		Members: []AdminMember{
			{MemberStatus: vdi.MemberStatus{Desktop: d, Consoles: 1}, Protocol: s, Path: s},
			{MemberStatus: vdi.MemberStatus{Desktop: vdi.Desktop{Member: vdi.Member{Namespace: s, Name: s, Pool: s, Power: vdi.PowerStopped}}}},
			{MemberStatus: vdi.MemberStatus{Desktop: vdi.Desktop{Member: vdi.Member{Namespace: s, Name: s, Pool: s, Power: vdi.PowerStopping}, Resetting: s}}},
		},
	}}}
	history := HistoryProps{Page: page, User: s, Pool: s, Since: s, Until: s, Pools: []string{s}, Query: "user=x",
		Sessions: []SessionRow{{ID: s, Login: s, Namespace: s, Member: s, Protocol: s, Path: s, CloseReason: s, OpenedAt: now}},
		Audit:    []AuditRow{{At: now, Actor: s, Action: s, Namespace: s, Target: s, Detail: s}}}
	return map[string]templ.Component{
		"admin":      Admin(admin),
		"admin-live": AdminLive(admin),
		"history":    History(history),
		"usage": Usage(UsageProps{Page: page, Zone: s, Every: s, Pools: []UsagePool{{Namespace: s, Name: s, Day: s, Week: s, Reclaims: s,
			DayChart: UsageChart{Title: s, Label: s}}}}),
		"home":       Home(HomeProps{Page: page, Desktops: []vdi.Desktop{d}, Pools: []PoolRow{{PoolStatus: pool, Mine: s}}}),
		"kiosk":      Kiosk(KioskProps{Page: page, Pool: s, Desktop: s, ConnectURL: s, ReleaseURL: s}),
		"kiosk-wait": Kiosk(KioskProps{Page: page, Pool: s, Msg: s, Hint: s}),
		"shadow":     Shadow(ShadowProps{Page: page, Heading: s, Badge: s, Back: "/", BackText: s, ConnectURL: s}),
		"console":    Console(ConsoleProps{Page: page, Desktop: d, ConnectURL: s, DesktopURL: s, USB: &USBHint{Command: s, TokenTTL: s}, Share: &ShareProps{URL: s}}),
	}
}

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestViews_EscapeUserFields renders each page with markup in every user
// field: no injected element appears, and there are exactly as many
// <script> tags as with harmless text.
func TestViews_EscapeUserFields(t *testing.T) {
	clean := pages("plain")
	for name, c := range pages(evil) {
		t.Run(name, func(t *testing.T) {
			out := render(t, c)
			doc := mustParse(t, out)
			isTag := func(tag string) func(*html.Node) bool { return func(n *html.Node) bool { return n.Data == tag } }
			if len(findAll(doc, isTag("xss-tag"))) > 0 {
				t.Errorf("%s page contains the injected element:\n%s", name, out)
			}
			if got, want := len(findAll(doc, isTag("script"))), len(findAll(mustParse(t, render(t, clean[name])), isTag("script"))); got != want {
				t.Errorf("%s page has %d <script> tags with injected text; want %d as with plain text", name, got, want)
			}
			if !strings.Contains(text(doc), "<xss-tag") {
				t.Errorf("%s page does not show the injected text escaped; was the field rendered at all?", name)
			}
		})
	}
}

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0 s"}, {45 * time.Second, "45 s"}, {12 * time.Minute, "12 min"},
		{3*time.Hour + 5*time.Minute, "3 h 5 min"}, {52 * time.Hour, "2 d 4 h"},
	} {
		if got := span(tc.d); got != tc.want {
			t.Errorf("span(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{15 * time.Minute, "15m"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {45 * time.Second, "45s"}, {61 * time.Second, "1m1s"},
	} {
		if got := shortDuration(tc.d); got != tc.want {
			t.Errorf("shortDuration(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

// TestAdmin_PoolFormLicences checks the New pool form's licences box on a
// cluster: it posts licensesAcknowledged and its description says what it
// is for. The local backend's form has none (it ignores licences).
func TestAdmin_PoolFormLicences(t *testing.T) {
	asset := func(p string) string { return "/static/" + p }
	local := mustParse(t, render(t, Admin(AdminProps{Page: Page{Title: "Pools", Asset: asset}})))
	if len(byTestID(local, "pool-licenses")) > 0 || len(findAll(local, hasAttrs("name", "licensesAcknowledged"))) > 0 {
		t.Error("the local backend's New pool form asks for Windows licences")
	}
	doc := mustParse(t, render(t, Admin(AdminProps{Page: Page{Title: "Pools", Asset: asset}, Cluster: true})))
	boxes := byTestID(doc, "pool-licenses")
	if len(boxes) != 1 || boxes[0].Data != "input" || !hasAttrs("type", "checkbox", "name", "licensesAcknowledged", "aria-describedby", "pool-licenses-help")(boxes[0]) {
		t.Fatalf("admin page has %d pool-licenses elements; want one checkbox licensesAcknowledged described by pool-licenses-help", len(boxes))
	}
	helps := findAll(doc, hasAttrs("id", "pool-licenses-help"))
	var help string
	if len(helps) == 1 {
		help = text(helps[0])
	}
	for _, want := range []string{"Windows", "Enterprise E3/E5", "RDS CALs", "more than one desktop"} {
		if !strings.Contains(help, want) {
			t.Errorf("licences help %q; want it to say %q", help, want)
		}
	}
}
