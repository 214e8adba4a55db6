package e2e

import (
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestRDPWatch_Consent: on a pool whose watch policy is consent, an
// admin's RDP console of alice's desktop waits until alice answers on her
// own console page, as a VNC watch does. Refused, the admin's page says
// alice did not allow it; allowed, the admin's RDP console draws the
// desktop and alice's page says the admin has a console open with
// control (RDP cannot share a view), until the admin leaves.
func TestRDPWatch_Consent(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // IronRDP compiles its wasm first
	if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", `{"name": "helped", "size": 1, "policy": {"watch": "consent"}}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	d := mustClaim(t, p, "alice", "helped")
	// The sign-in is the holder's to give: the portal shows it to alice
	// only, and she tells the admin who helps her.
	var info struct {
		Credentials *struct{ Username, Password string } `json:"credentials"`
		Asks        string                               `json:"asks"`
	}
	if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d.Name+"/connect?protocol=rdp", &info); code != 200 || info.Credentials == nil {
		t.Fatalf("alice's /connect?protocol=rdp: %d, credentials %v", code, info.Credentials)
	}
	if info.Asks != "" {
		t.Errorf("the holder's /connect says her console asks %q", info.Asks)
	}
	creds := *info.Credentials
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	notice := page.GetByTestId("watch-notice")
	ask := page.GetByTestId("watch-ask")

	for _, answer := range []string{"refuse", "allow"} {
		t.Run(answer, func(t *testing.T) {
			admin := b.MustNewPage(t, 1280, 800)
			defer admin.Close()
			signIn(t, admin, p, "boss", "/desktops/local/"+d.Name+"?protocol=rdp")
			must(t, expect.Locator(admin.GetByTestId("rdp-password")).ToBeVisible())
			must(t, admin.GetByTestId("rdp-username").Fill(creds.Username))
			must(t, admin.GetByTestId("rdp-password").Fill(creds.Password))
			must(t, admin.GetByTestId("rdp-password").Press("Enter"))
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("Waiting for alice to allow your console…"))
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(ask).ToHaveCount(1))
			must(t, expect.Locator(ask).ToContainText("boss asks to open a console of this desktop (they could type in it)."))
			screenshot(t, page, "rdp-asks")
			// A holder takes a moment to answer: the admin's console
			// still waits, neither connected nor given up.
			time.Sleep(3 * time.Second)
			if s, _ := admin.GetByTestId("status").TextContent(); s != "Waiting for alice to allow your console…" {
				t.Fatalf("before alice answered, the admin's status is %q", s)
			}
			must(t, page.GetByTestId("watch-"+answer).Click())
			if answer == "refuse" {
				must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("alice did not allow the watch."))
				must(t, expect.Locator(admin.GetByTestId("ended")).ToBeVisible())
				must(t, expect.Locator(notice).ToBeHidden())
				screenshot(t, admin, "rdp-refused")
				return
			}
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("Connected"))
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(notice).ToContainText("boss has a console of it open and can type in it."))
			waitFor(t, 30*time.Second, "the admin's RDP console draws alice's desktop", func() bool {
				shot, err := admin.Locator("iron-remote-desktop canvas").Screenshot()
				return err == nil && rdpColours(t, shot) > 20
			})
			screenshot(t, admin, "rdp-allowed")
			screenshot(t, page, "rdp-watched")
			admin.Close()
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(10000)).Locator(notice).ToBeHidden())
		})
	}
}
