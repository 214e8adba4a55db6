package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Where is a desktop the agent holds, as claim_desktop named it.
type Where struct {
	Desktop string `json:"desktop" jsonschema:"the desktop as claim_desktop named it, namespace/member"`
}

// Point is a screen position on a desktop.
type Point struct {
	Where
	X int `json:"x" jsonschema:"pixels from the left edge of the full-size screen"`
	Y int `json:"y" jsonschema:"pixels from the top edge of the full-size screen"`
}

// cost says which of a token's limits a call draws on.
type cost int

const (
	free cost = iota
	input
	screen
)

// call is one tool call on a desktop: the checks every such call passes
// (the desktop is the caller's, within the token's pools; the rate
// limit; the audit row), then run.
func (s *Seat) call(ctx context.Context, id vdi.Identity, tool, desktop string, detail func(vdi.Desktop) string, c cost, run func(ctx context.Context, d vdi.Desktop, st *seat) error) error {
	ref, err := parseRef(desktop)
	if err != nil {
		return err
	}
	d, err := s.cfg.Desktops.Desktop(ctx, id, ref)
	if err != nil {
		return err
	}
	if d.Holder != id.Login {
		return vdi.Errorf(vdi.EForbidden, "", "desktop %s is not claimed by %s: claim one with claim_desktop", ref, id.Login)
	}
	if err := s.barred(d, c == input); err != nil {
		return err
	}
	if err := s.limit(id, c); err != nil {
		return err
	}
	if err := s.cfg.Desktops.MarkAgent(ctx, id, ref); err != nil {
		s.cfg.Log.Warn("agent not noted on the claim", "desktop", ref, "err", err)
	}
	s.audit(ctx, id, tool, ref, detail(d))
	ctx, done := s.fly(ctx, id, ref, c == input)
	defer done()
	st, err := s.seats.get(ctx, ref, id)
	if err != nil {
		return cut(ctx, err)
	}
	if err := run(ctx, d, st); err != nil {
		s.seats.close(ref) // the next call joins the screen afresh
		return cut(ctx, err)
	}
	if c == input {
		s.noteInput(ctx, ref)
	}
	return nil
}

// limit takes a token of id's limit for c, or says how long to wait.
func (s *Seat) limit(id vdi.Identity, c cost) error {
	l := s.limitsOf(id)
	var lim = l.input
	switch c {
	case free:
		return nil
	case screen:
		lim = l.screen
	}
	if !lim.Allow() {
		return vdi.Errorf(vdi.ETooMany, "", "rate limit: too many calls from token %s; wait a second (use wait_for_change rather than polling)", tokenName(id))
	}
	return nil
}

func (s *Seat) audit(ctx context.Context, id vdi.Identity, tool string, ref vdi.Ref, detail string) {
	if s.cfg.Audit == nil {
		return
	}
	e := vdi.AuditEvent{Actor: id.Login, Action: "agent-" + strings.ReplaceAll(tool, "_", "-"), Namespace: ref.Namespace, Target: ref.Name,
		Detail: strings.TrimSpace(id.Agent() + " " + detail)}
	if err := s.cfg.Audit.Record(ctx, e); err != nil {
		s.cfg.Log.Error("audit", "action", e.Action, "err", err)
	}
}

func tokenName(id vdi.Identity) string {
	if id.Token == nil {
		return id.Login
	}
	return id.Token.Name
}

// parseRef reads "ns/member".
func parseRef(s string) (vdi.Ref, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return vdi.Ref{}, vdi.Errorf(vdi.EInvalid, "", "desktop %q: name it namespace/member, as claim_desktop answered", s)
	}
	return vdi.Ref{Namespace: ns, Name: name}, nil
}

// text is a tool result of one line of text.
func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// say is an audit detail that is the same whatever the desktop.
func say(s string) func(vdi.Desktop) string { return func(vdi.Desktop) string { return s } }

// typed keeps the text of a call for the audit log only where the pool's
// clipboard policy lets text into the desktop at all.
func typed(d vdi.Desktop, s string) string {
	if d.Console.Clipboard == vdi.ClipboardBoth {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("(%d characters)", len([]rune(s)))
}

// clamp keeps a point on the screen.
func clamp(st *seat, x, y int) (int, int) {
	w, h := st.v.Size()
	return min(max(x, 0), w-1), min(max(y, 0), h-1)
}

// pause lets the desktop see a press before its release.
func pause() { time.Sleep(15 * time.Millisecond) }
