package e2e

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// oversightOnHomeAndDashboard: the agent's oversight from alice's home
// page and from ops's dashboard, in Chromium. Alice hands back and takes
// control on her tile; ops stops a second token's agent on the dashboard
// with "Revoke its token too" and lets other agents in (the revoked one
// cannot go on); alice then stops her first agent from home, revoking
// its token: her tile no longer offers to let it go on. Each revoke
// takes the token the claim names (the one the agent last worked with),
// audited, and leaves the other. s is the agent with tok; it worked in
// desk last. console is alice's console page of desk, whose agent notice
// follows.
func oversightOnHomeAndDashboard(t *testing.T, p *Portal, b *Browser, console playwright.Page, s *mcp.ClientSession, tok token, desk string) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	state := func() (d struct{ AgentControl string }) {
		p.API(t, "alice", "GET", "/api/vdi/desktops/"+desk, &d)
		return d
	}
	home := uxPage(t, b, 1280, 800, false)
	signIn(t, home, p, "alice", "/")
	tile := home.Locator(`[data-testid=desktop][data-desktop="` + desk + `"]`)
	must(t, expect.Locator(tile.GetByTestId("agent")).ToHaveText("bot:alice/test-runner"))
	if state().AgentControl == "alice" { // where the tabs left it
		must(t, tile.GetByTestId("agent-hand-back").Click())
	}
	must(t, expect.Locator(tile.GetByTestId("agent-take")).ToBeVisible())
	if d := state(); d.AgentControl != "" {
		t.Errorf("after Hand back on home, control is %q's", d.AgentControl)
	}
	must(t, tile.GetByTestId("agent-take").Click())
	must(t, expect.Locator(tile.GetByTestId("agent-state")).ToContainText("You took control"))
	if d := state(); d.AgentControl != "alice" {
		t.Errorf("after Take control on home, control is %q's; want alice's", d.AgentControl)
	}
	screenshotsAt(t, home, tile.GetByTestId("agent-hand-back"), "home-agent")
	must(t, tile.GetByTestId("agent-hand-back").Click())
	must(t, expect.Locator(tile.GetByTestId("agent-take")).ToBeVisible())

	// A second token of alice's works in the desktop: the claim names it.
	helper := mustToken(t, p, "alice", `{"name": "helper", "pools": ["local/demo"]}`)
	hs := mustMCP(t, p, helper.Token)
	tool(t, hs, "screenshot", map[string]any{"desktop": desk})

	admin := uxPage(t, b, 1280, 800, false)
	signIn(t, admin, p, "ops", "/admin")
	row := admin.Locator(`[data-testid=member][data-desktop="` + desk + `"]`)
	must(t, expect.Locator(row.GetByTestId("agent")).ToHaveText("bot:alice/helper"))
	must(t, row.GetByTestId("agent-stop").Click())
	dialog := admin.GetByTestId("action-dialog")
	must(t, expect.Locator(dialog).ToContainText("Stop bot:alice/helper"))
	must(t, dialog.GetByTestId("dialog-check").Check())
	screenshotsAt(t, admin, dialog.GetByTestId("dialog-confirm"), "dashboard-agent-stop")
	must(t, dialog.GetByTestId("dialog-confirm").Click())
	// Its token revoked, the agent cannot go on: the row says so and
	// offers to let other agents in.
	must(t, expect.Locator(row.GetByTestId("agent-state")).ToContainText("You stopped it and revoked its token"))
	must(t, expect.Locator(row.GetByTestId("agent-go-on")).ToHaveText("Let other agents in"))
	screenshotsAt(t, admin, row.GetByTestId("agent-go-on"), "dashboard-agent-stopped")
	if code, _ := p.bearer(t, helper.Token, "GET", "/api/vdi/desktops", ""); code != 401 {
		t.Errorf("the helper token after ops stopped its agent and revoked it: %d; want 401", code)
	}
	if got := toolRefused(t, s, "screenshot", map[string]any{"desktop": desk}); !strings.Contains(got, "ops stopped the agent's work") {
		t.Errorf("alice's first agent while ops's stop holds: %q", got)
	}
	must(t, row.GetByTestId("agent-go-on").Click())
	must(t, expect.Locator(dialog).ToContainText("Let other agents in"))
	must(t, dialog.GetByTestId("dialog-confirm").Click())
	tool(t, s, "screenshot", map[string]any{"desktop": desk}) // test-runner works again, named on the claim
	must(t, expect.Locator(row.GetByTestId("agent")).ToHaveText("bot:alice/test-runner"))
	must(t, expect.Locator(row.GetByTestId("agent-stop")).ToBeVisible())

	// Alice stops it from home, its token revoked too.
	_, err := home.Reload()
	must(t, err)
	must(t, expect.Locator(tile.GetByTestId("agent")).ToHaveText("bot:alice/test-runner"))
	must(t, tile.GetByTestId("agent-revoke").Check())
	must(t, tile.GetByTestId("agent-stop").Click())
	must(t, expect.Locator(tile.GetByTestId("agent-state")).ToContainText("You stopped it and revoked its token"))
	must(t, expect.Locator(tile.GetByTestId("agent-go-on")).ToHaveText("Let other agents in"))
	must(t, expect.Locator(tile.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Let the agent go on"})).ToHaveCount(0))
	screenshotsAt(t, home, tile.GetByTestId("agent-go-on"), "home-agent-revoked")
	must(t, expect.Locator(console.GetByTestId("agent-state")).ToContainText("You stopped it and revoked its token"))
	must(t, expect.Locator(console.GetByTestId("agent-let-in")).ToBeVisible())
	must(t, expect.Locator(console.GetByTestId("agent-go-on")).ToBeHidden())
	screenshotsAt(t, console, console.GetByTestId("agent-let-in"), "console-agent-revoked")
	if code, _ := p.bearer(t, tok.Token, "GET", "/api/vdi/desktops", ""); code != 401 {
		t.Errorf("test-runner's token after alice stopped it with its token: %d; want 401", code)
	}
	var audit []struct{ Actor, Action, Target, Detail string }
	p.API(t, "ops", "GET", "/api/vdi/history/audit", &audit)
	revoked := map[string]string{}
	for _, a := range audit {
		if a.Action == "token-revoke" && a.Target == "alice" {
			revoked[a.Detail] = a.Actor
		}
	}
	if revoked["token helper"] != "ops" || revoked["token test-runner"] != "alice" {
		t.Errorf("token-revoke rows of alice's tokens: %v; want helper by ops, test-runner by alice", revoked)
	}
}

// screenshotsAt saves page as name-<size> at each of the issue's sizes,
// once shown is in view there, and leaves it at 1280x800.
func screenshotsAt(t *testing.T, page playwright.Page, shown playwright.Locator, name string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	for _, size := range issueSizes {
		must(t, page.SetViewportSize(size.width, size.height))
		must(t, expect.Locator(shown).ToBeInViewport())
		screenshot(t, page, name+"-"+size.name)
	}
	must(t, page.SetViewportSize(1280, 800))
}
