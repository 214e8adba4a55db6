package e2e

import (
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestStandby_DemandField sets a pool's standby to follow demand and its
// working hours from the dashboard, on a laptop and a phone: the pool
// shows the range and the hours, a bad entry is refused with what to
// write (the dialog stays open), and every change is audited.
func TestStandby_DemandField(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools",
		`{"name": "office", "size": 3, "mode": "ephemeral", "standby": {"min": 0, "max": 2}}`, nil); code != 201 {
		t.Fatalf("create office with standby {min 0, max 2}: %d", code)
	}
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "bad", "size": 1, "standby": {"min": 3, "max": 1}}`, nil); code != 400 {
		t.Errorf("create a pool with standby max below min: %d; want 400", code)
	}
	b := MustLaunchBrowser(t)
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 800}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/office", `{"standby": {"min": 0, "max": 2}, "standbySchedule": {}}`, nil); code != 200 {
				t.Fatalf("reset office's standby: %d", code)
			}
			page := b.MustNewPage(t, size.width, size.height)
			signIn(t, page, p, "ops", "/admin")
			expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
			card := page.Locator(`[data-testid=admin-pool][data-pool=office]`)
			must(t, expect.Locator(card.GetByTestId("pool-standby")).ToContainText("standby 0-2 by demand, 0 wanted now"))

			adminAct(t, page, card, "edit-standby", "0-3")
			must(t, expect.Locator(card.GetByTestId("pool-standby")).ToContainText("standby 0-3 by demand"))

			// A time that is no time: refused, the dialog stays open with the hint.
			must(t, card.GetByTestId("edit-standby-schedule").Click())
			dialog := page.GetByTestId("action-dialog")
			must(t, dialog.GetByTestId("dialog-input").Fill("mon-fri 25:00-18:00 1 Europe/Berlin"))
			must(t, dialog.GetByTestId("dialog-confirm").Click())
			must(t, expect.Locator(dialog).ToContainText("HH:MM"))
			must(t, dialog.GetByTestId("dialog-input").Fill("mon-fry 08:00-18:00 1 Europe/Berlin"))
			must(t, dialog.GetByTestId("dialog-confirm").Click())
			must(t, expect.Locator(dialog).ToContainText("mon-fri"))
			must(t, dialog.GetByTestId("dialog-input").Fill("sun-sat 00:00-23:59 1 Europe/Berlin"))
			must(t, dialog.GetByTestId("dialog-confirm").Click())
			must(t, expect.Locator(dialog).ToBeHidden())
			// Every day, all day: the floor of 1 holds now.
			must(t, expect.Locator(card.GetByTestId("pool-standby")).ToContainText("1 wanted now"))
			must(t, expect.Locator(card.GetByTestId("pool-standby")).ToContainText("1 on sun-sat 00:00-23:59 Europe/Berlin"))
			docShot(t, page, "admin-standby-"+size.name)

			// Clear the hours again for the next size.
			adminAct(t, page, card, "edit-standby-schedule", " ")
			must(t, expect.Locator(card.GetByTestId("pool-standby")).Not().ToContainText("sun-sat"))
		})
	}
	if !auditHas(t, p, "user=ops", "pool-standby", "office", "schedule none -> 1 on sun-sat 00:00-23:59 Europe/Berlin") {
		t.Error("audit log has no pool-standby line naming the schedule")
	}
}
