package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The disconnect grace and the agent's seat idle of
// TestMCP_AgentWorksInADesktop's portal: short, yet with room for the
// longest pause of its agent between two calls on a loaded machine.
const (
	agentGrace    = 10 * time.Second
	agentSeatIdle = 10 * time.Second
)

// agentKeepsItsDesktop: an agent that works in desk, with no person's
// console open, keeps it well past the disconnect grace (without its
// screen counting as a console, the grace took it 10 s after the claim).
func agentKeepsItsDesktop(t *testing.T, p *Portal, s *mcp.ClientSession, desk string, claimedAt time.Time) {
	t.Helper()
	for time.Since(claimedAt) < 2*agentGrace+5*time.Second {
		tool(t, s, "wait_for_change", map[string]any{"desktop": desk, "timeout_ms": 2000})
	}
	_, member, _ := strings.Cut(desk, "/")
	if h := holder(t, p, member); h != "alice" {
		t.Fatalf("%s, worked in by alice's agent for %v with a %v grace, is held by %q; want alice", desk, time.Since(claimedAt).Round(time.Second), agentGrace, h)
	}
}

// agentStopsCalling: an agent claims a desktop, takes one screenshot and
// calls no more; its screen closes after the seat idle and the
// disconnect grace then reclaims the desktop — never before both passed.
func agentStopsCalling(t *testing.T, p *Portal, s *mcp.ClientSession) {
	var c struct{ Desktop string }
	if err := json.Unmarshal([]byte(resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/demo"}))), &c); err != nil {
		t.Fatal(err)
	}
	_, member, _ := strings.Cut(c.Desktop, "/")
	last := time.Now()
	tool(t, s, "screenshot", map[string]any{"desktop": c.Desktop})
	waitFor(t, 2*time.Minute, "the desktop of the agent that stopped calling reclaimed", func() bool { return holder(t, p, member) == "" })
	if took := time.Since(last); took < agentSeatIdle+agentGrace {
		t.Errorf("reclaimed %v after the agent's last call; want no sooner than the seat idle and the grace (%v)", took.Round(100*time.Millisecond), agentSeatIdle+agentGrace)
	}
	// The log line comes once the member is made fresh.
	waitFor(t, time.Minute, "the portal's log to show a disconnect-grace reclaim of "+member, func() bool {
		return strings.Contains(p.Log(), `msg=reclaimed desktop=`+c.Desktop+` holder=alice rule=disconnect-grace`)
	})
}
