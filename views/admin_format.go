package views

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AdminProps is the admin dashboard's data.
type AdminProps struct {
	Page
	Pools []AdminPool
	// Now is when the data was read; times left are counted from it.
	Now time.Time
	// ThumbVersion changes every thumbnail refresh period, so that a
	// re-rendered dashboard fetches new thumbnails only that often.
	ThumbVersion int64
	// Notice is a degraded part of the portal, e.g. the history database
	// not answering; empty when all is well.
	Notice string
	// Cluster says the backend is Kubernetes: the new pool dialog asks for
	// a namespace, a golden source and the Windows licences.
	Cluster bool
}

// AdminPool is a pool on the dashboard.
type AdminPool struct {
	vdi.PoolDashboard
	Members []AdminMember
}

// AdminMember is a member on the dashboard with its newest open console.
type AdminMember struct {
	vdi.MemberStatus
	// Protocol and Path describe the newest open console, if any.
	Protocol, Path string
}

// ago renders how long before now t was, or "never".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return span(now.Sub(t)) + " ago"
}

// span renders a duration coarsely: 45 s, 12 min, 3 h 5 min, 2 d 4 h.
func span(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// timeLeft renders the next reclaim of a claim, or "" when none applies.
func timeLeft(now time.Time, r *vdi.Deadline) string {
	if r == nil {
		return ""
	}
	if !r.At.After(now) {
		return "due now (" + ruleText(r.Rule) + ")"
	}
	return span(r.At.Sub(now)) + " (" + ruleText(r.Rule) + ")"
}

// ruleText says what a reclaim rule means in a few words.
func ruleText(rule string) string {
	switch rule {
	case vdi.RuleDisconnect:
		return "no console open"
	case vdi.RuleIdle:
		return "no input"
	case vdi.RuleMaxSession:
		return "session limit"
	case vdi.RuleExpired:
		return "claim expired"
	}
	return rule
}

// resettingWhy says why a member is being reset: released, or a reclaim
// rule's words.
func resettingWhy(rule string) string {
	switch rule {
	case "release":
		return "after its release"
	case "force-release":
		return "after a force-release"
	}
	return "reclaimed: " + ruleText(rule)
}

// resettingCount is the pool counts' part for members being reset, if any.
func resettingCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" · %d resetting", n)
}

// policyText renders a pool's effective reclaim policy in words.
func policyText(p vdi.Policy) string {
	off := func(d time.Duration) string {
		if d == 0 {
			return "off"
		}
		return shortDuration(d)
	}
	s := "grace " + off(p.DisconnectGrace) + " · max session " + off(p.MaxSession) + " · idle " + off(p.IdleTimeout)
	switch {
	case p.Record && p.RecordInput:
		s += " · recorded, with keystrokes"
	case p.Record:
		s += " · recorded"
	}
	if p.Record && p.OwnRecordings {
		s += " · users play back their own"
	}
	return s
}

// networkPolicyText says what a local pool's desktops may reach.
func networkPolicyText(n vdi.Network) string {
	switch n {
	case vdi.NetworkNone:
		return "offline: each desktop has only a loopback of its own"
	case vdi.NetworkOutbound, "":
		return "outbound through a network stack of its own; never the portal's host"
	}
	return string(n)
}

// consolePolicyText says what a pool's consoles may carry; files says
// whether any console of it could transfer files (the Files panel of a
// local session desktop, or RDP to a server with a file channel on an
// unrecorded pool of a cluster).
func consolePolicyText(c vdi.ConsolePolicy, files bool) string {
	ways := map[vdi.Clipboard]string{vdi.ClipboardBoth: "both ways", vdi.ClipboardToDesktop: "to the desktop only",
		vdi.ClipboardFromDesktop: "from the desktop only", vdi.ClipboardOff: "off"}
	watch := map[vdi.Watch]string{vdi.WatchNotify: "watching shown to the user", vdi.WatchConsent: "watching only with the user's consent", vdi.WatchOff: "no watching"}
	s := "clipboard " + ways[c.Clipboard]
	if files {
		ft := vdi.FileTransfer{Upload: vdi.ToggleOf(c.Upload), Download: vdi.ToggleOf(c.Download)}
		s += " · file transfer " + ft.String()
	}
	if !c.Audio {
		s += " · no sound"
	}
	return s + " · " + watch[c.Watch]
}

// policyJSON is a pool's policy as the dashboard's Policy dialog fills
// its fields (the API's shape: durations as text, empty for the default).
func policyJSON(p vdi.Policy) string {
	b, _ := json.Marshal(api.PolicyOf(p))
	return string(b)
}

// shortDuration renders d like time.Duration.String without zero tails:
// 15m, 1h, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func thumbURL(ns, name string, v int64) string {
	return fmt.Sprintf("/admin/thumbs/%s/%s?v=%d", ns, name, v)
}

func shadowURL(ns, name string) templ.SafeURL {
	return templ.SafeURL("/admin/shadow/" + ns + "/" + name)
}

func hasProtocol(m vdi.Member, p vdi.Protocol) bool {
	return slices.Contains(m.Protocols, p)
}

// accessEntries writes an access list as the dashboard's access input
// takes it: logins, and groups as group:NAME, comma-separated.
func accessEntries(a vdi.Access) string {
	var parts []string
	for _, g := range a.Groups {
		parts = append(parts, "group:"+g)
	}
	parts = append(parts, a.Users...)
	return strings.Join(parts, ", ")
}

// limitsText says what one user may hold of a pool.
func limitsText(l vdi.Limits) string {
	switch l.DesktopsPerUser {
	case 0:
		return "no limit per user"
	case 1:
		return "1 desktop per user"
	}
	return strconv.Itoa(l.DesktopsPerUser) + " desktops per user"
}

// plural is n and the noun, made plural unless n is 1 ("1 member", "2 members").
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// jobText names what a pool's job does, e.g. "Creating the pool" or
// "Recreating desk-3", and who asked.
func jobText(j vdi.Job) string {
	what := map[vdi.JobKind]string{vdi.JobCreate: "Creating the pool", vdi.JobGrow: "Adding desktops",
		vdi.JobShrink: "Removing desktops", vdi.JobRecreate: "Recreating " + j.Member}[j.Kind]
	if what == "" {
		what = string(j.Kind)
	}
	if j.By != "" {
		what += " (" + j.By + ")"
	}
	return what
}

// jobBusy says why a pool's Resize and Delete wait, or "" when they need
// not: one job runs per pool.
func jobBusy(j *vdi.Job) string {
	if j == nil || j.State != vdi.JobRunning {
		return ""
	}
	return jobText(*j) + " is under way (" + j.Progress + "); Resize, Delete and Recreate wait until it ends."
}

// memberBusy says why a member's action waits for its pool's job j, or ""
// when it need not: a recreate is a job of its own, which the server
// refuses (409) while another runs; the member a recreate works on takes
// no start or assign until it is fresh.
func memberBusy(j *vdi.Job, member, action string) string {
	if busy := jobBusy(j); busy != "" {
		switch {
		case action == "recreate":
			return busy
		case j.Kind == vdi.JobRecreate && j.Member == member && (action == "start" || action == "assign"):
			return jobText(*j) + " is under way (" + j.Progress + "); it takes no start or assign until it is fresh."
		}
	}
	return ""
}
