package e2e

import (
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestTokens_Page: alice makes a token on the Tokens page that may only
// see (none ticked is refused), sees it once,
// uses it, finds it listed with its last use and revokes it there; the
// page is shot at laptop, tablet and phone sizes.
func TestTokens_Page(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 800}, {"tablet", 1024, 1366}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			page := b.MustNewPage(t, size.width, size.height)
			user := "alice-" + size.name
			signIn(t, page, p, user, "/tokens")
			must(t, expect.Locator(page.GetByTestId("no-tokens")).ToBeVisible())
			must(t, page.GetByTestId("token-name").Fill("test-runner"))
			for _, sc := range []string{"act", "claim"} { // a token that only looks
				must(t, page.GetByTestId("token-scope-"+sc).Uncheck())
			}
			if size.name == "laptop" {
				must(t, page.GetByTestId("token-scope-see").Uncheck())
				must(t, page.GetByTestId("token-create").Click())
				must(t, expect.Locator(page.GetByTestId("token-error")).ToContainText("needs a scope"))
				must(t, page.GetByTestId("token-name").Fill("test-runner"))
				for _, sc := range []string{"act", "claim"} {
					must(t, page.GetByTestId("token-scope-"+sc).Uncheck())
				}
			}
			must(t, page.GetByTestId("token-create").Click())
			must(t, expect.Locator(page.GetByTestId("token-made")).ToBeVisible())
			secret, err := page.GetByTestId("token-secret").InputValue()
			must(t, err)
			if !strings.HasPrefix(secret, "cvdi_") {
				t.Fatalf("the page shows token %q; want cvdi_…", secret)
			}
			if code, body := p.bearer(t, secret, "GET", "/api/vdi/pools", ""); code != 200 || !strings.Contains(body, `"demo"`) {
				t.Fatalf("pools with the page's token: %d %s", code, body)
			}
			if code, body := p.bearer(t, secret, "POST", "/api/vdi/pools/local/demo/claim", ""); code != 403 || !strings.Contains(body, `lacks the \"claim\" scope`) {
				t.Errorf("a claim with the see-only token: %d %s; want 403 naming the claim scope", code, body)
			}
			if _, err := page.Goto(p.URL + "/tokens"); err != nil {
				t.Fatal(err)
			}
			must(t, expect.Locator(page.GetByTestId("token-made")).ToHaveCount(0))
			must(t, expect.Locator(page.GetByTestId("token-last-used")).Not().ToHaveText("never"))
			must(t, expect.Locator(page.GetByTestId("token-scopes-of")).ToHaveText("see"))
			screenshot(t, page, "tokens-"+size.name)
			must(t, page.GetByTestId("token-revoke").Click())
			must(t, page.GetByTestId("confirm-yes").Click())
			must(t, expect.Locator(page.GetByTestId("no-tokens")).ToBeVisible())
			if code, _ := p.bearer(t, secret, "GET", "/api/vdi/pools", ""); code != 401 {
				t.Errorf("the revoked token: %d; want 401", code)
			}
		})
	}
}
