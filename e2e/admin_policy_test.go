package e2e

import (
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestAdmin_PolicyEditKeepsWhatItDoesNotChange: the pool dialog sets a
// local pool's network and which way files move, and saving the Policy
// dialog after changing one field keeps every other field as it was,
// including a network of none set through the API (PATCH replaces the
// whole policy, so a dialog that forgot a field would turn it back to the
// default: for the network, outbound).
func TestAdmin_PolicyEditKeepsWhatItDoesNotChange(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	page := b.MustNewPage(t, 1280, 800)

	// A pool made through the API, offline, with files in only.
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools",
		`{"name":"api","size":1,"policy":{"network":"none","fileTransfer":{"upload":true,"download":false},"watch":"consent"}}`, nil); code != 201 && code != 200 {
		t.Fatalf("pool create: %d", code)
	}
	signIn(t, page, p, "ops", "/admin")
	dialog := page.GetByTestId("pool-dialog")
	card := page.Locator(`[data-testid=admin-pool][data-pool=api]`)
	must(t, expect.Locator(card.GetByTestId("network-policy")).ToContainText("offline"))
	must(t, expect.Locator(card.GetByTestId("console-policy")).ToContainText("file transfer upload only"))
	must(t, card.GetByTestId("edit-policy").Click())
	must(t, expect.Locator(dialog.GetByTestId("pool-network")).ToHaveValue("none"))
	must(t, expect.Locator(dialog.GetByTestId("pool-file-transfer")).ToHaveValue("upload"))
	must(t, dialog.Locator("[name=idleTimeout]").Fill("2h"))
	screenshot(t, page, "edit-policy-network")
	must(t, dialog.GetByTestId("pool-create").Click())
	must(t, expect.Locator(dialog).ToBeHidden())
	must(t, expect.Locator(card.GetByTestId("policy")).ToContainText("idle 2h"))
	got := poolPolicy(t, p, "api")
	if got.Network != vdi.NetworkNone || got.FileTransfer.String() != "upload only" || got.Watch != vdi.WatchConsent {
		t.Errorf("after changing the idle timeout in the dialog the policy is network %q, files %s, watch %q: want none, upload only, consent",
			got.Network, got.FileTransfer, got.Watch)
	}

	// The New pool dialog sets both.
	must(t, page.GetByTestId("new-pool").Click())
	must(t, dialog.GetByTestId("pool-name").Fill("lab"))
	must(t, dialog.GetByTestId("pool-size").Fill("1"))
	for id, v := range map[string]string{"pool-network": "none", "pool-file-transfer": "download"} {
		_, err := dialog.GetByTestId(id).SelectOption(playwright.SelectOptionValues{Values: &[]string{v}})
		must(t, err)
	}
	must(t, dialog.GetByTestId("pool-create").Click())
	must(t, expect.Locator(dialog).ToBeHidden())
	got = poolPolicy(t, p, "lab")
	if got.Network != vdi.NetworkNone || got.FileTransfer.String() != "download only" {
		t.Errorf("the New pool dialog made network %q, files %s: want none, download only", got.Network, got.FileTransfer)
	}
	if !auditHas(t, p, "", "pool-policy", "api", "idle 2h0m0s", "network none") {
		t.Error("the audit log has no pool-policy row for the edit")
	}
}

// poolPolicy reads pool local/name's policy from the API.
func poolPolicy(t *testing.T, p *Portal, name string) vdi.Policy {
	t.Helper()
	var pools []vdi.PoolStatus
	p.API(t, "ops", "GET", "/api/vdi/pools", &pools)
	for _, pool := range pools {
		if pool.Namespace == "local" && pool.Name == name {
			return pool.Policy
		}
	}
	var names []string
	for _, pool := range pools {
		names = append(names, pool.Name)
	}
	t.Fatalf("no pool local/%s among %s", name, strings.Join(names, ", "))
	return vdi.Policy{}
}
