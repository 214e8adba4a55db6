package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 58, item 1: a desktop that crashes under its console is not a dead
// end. The card says what happened in plain words with its way back ("Get a
// fresh desktop" for an ephemeral pool, "Start it again" for a persistent
// one), nothing reconnects by itself, the home tile offers the same, and
// only an admin reads the diagnostics.

// MustOpenConsole claims a desktop of pool for user through the API and
// opens its console in a new page of the given size (a touch device when
// touch), signed in as user, once it says Connected.
func MustOpenConsole(t *testing.T, b *Browser, p *Portal, user, pool string, width, height int, touch bool) (playwright.Page, desktop) {
	t.Helper()
	d := mustClaim(t, p, user, pool)
	page := uxPage(t, b, width, height, touch)
	signIn(t, page, p, user, "/desktops/local/"+d.Name)
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(20000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	return page, d
}

func TestConsoleDown_CrashedDesktopHasAWayBack(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=4", "CORRAL_VDI_ADMINS=boss")
	if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", `{"name":"keep","mode":"persistent","size":1}`, nil); code != 200 && code != 201 {
		t.Fatalf("creating a persistent pool: %d", code)
	}
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))

	// crash kills the desktop's Xvnc under the open console and checks
	// the card: plain words, the way back, and no reconnecting.
	crash := func(t *testing.T, page playwright.Page, user, member, action string) {
		t.Helper()
		connects := 0
		page.OnRequest(func(r playwright.Request) {
			if strings.Contains(r.URL(), "/connect") || strings.Contains(r.URL(), "/ws/") {
				connects++
			}
		})
		killRecorded(t, p, member, "Xvnc")
		must(t, expect.Locator(page.GetByTestId("ended-title")).ToHaveText("Your desktop stopped unexpectedly"))
		must(t, expect.Locator(page.GetByTestId("start-again")).ToHaveText(action))
		must(t, expect.Locator(page.GetByTestId("home")).ToBeVisible())
		must(t, expect.Locator(page.GetByTestId("reconnect")).ToBeHidden())
		must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText("It stopped on its own"))
		must(t, expect.Locator(page.GetByTestId("clipboard-toggle")).ToBeHidden())
		// Item 7: the card lies over the dimmed last frame, not over black.
		must(t, expect.Locator(page.Locator("#screen canvas")).ToBeVisible())
		for _, raw := range []string{"Xvnc", "exit status", "limits", "Reconnecting"} {
			if text, _ := page.Locator("body").InnerText(); strings.Contains(text, raw) {
				t.Errorf("the page shows %q to the user: %q", raw, text)
			}
		}
		seen := connects
		time.Sleep(4 * time.Second) // a reconnect loop would have tried by now (1 s, then 2 s)
		if connects != seen {
			t.Errorf("the page tried to connect %d times after the card showed; want none", connects-seen)
		}
		var mine, admins desktop
		p.API(t, user, "GET", "/api/vdi/desktops/local/"+member, &mine)
		p.API(t, "boss", "GET", "/api/vdi/desktops/local/"+member, &admins)
		if mine.Power != "failed" || strings.Contains(mine.Reason, "Xvnc") {
			t.Errorf("the holder reads %s %q; want failed in plain words", mine.Power, mine.Reason)
		}
		if !strings.Contains(admins.Reason, "Xvnc") {
			t.Errorf("the admin reads %q; want the diagnostics", admins.Reason)
		}
	}

	for _, s := range uxSizes {
		t.Run("ephemeral/"+s.name, func(t *testing.T) {
			page, d := MustOpenConsole(t, b, p, "eve-"+s.name, "demo", s.width, s.height, s.touch)
			crash(t, page, "eve-"+s.name, d.Name, "Get a fresh desktop")
			screenshot(t, page, "crashed")
			must(t, page.GetByTestId("start-again").Click())
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(page.GetByTestId("ended")).ToBeHidden())
			screenshot(t, page, "fresh")
		})
	}

	t.Run("persistent from home", func(t *testing.T) {
		page, d := MustOpenConsole(t, b, p, "pat", "keep", 1280, 800, false)
		term := openTerminal(t, p, "pat", d.Name)
		term.run("echo kept-58 > ~/notes", 10*time.Second)
		term.ws.Close()
		crash(t, page, "pat", d.Name, "Start it again")
		must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText("Its disk is kept"))
		home := uxPage(t, b, 390, 844, true)
		signIn(t, home, p, "pat", "/")
		tile := home.Locator(`[data-testid=desktop][data-desktop="local/` + d.Name + `"]`)
		must(t, expect.Locator(tile.GetByTestId("start-again")).ToHaveText("Start it again"))
		must(t, expect.Locator(tile).ToContainText("It stopped on its own"))
		must(t, expect.Locator(tile.GetByTestId("open")).ToHaveCount(0))
		if text, _ := tile.InnerText(); strings.Contains(text, "Xvnc") {
			t.Errorf("the home tile shows the diagnostics: %q", text)
		}
		screenshot(t, home, "home-stopped")
		must(t, tile.GetByTestId("start-again").Click())
		must(t, expect.Locator(home.GetByTestId("status")).ToHaveText("Connected"))
		term = openTerminal(t, p, "pat", d.Name)
		if out := term.run("cat ~/notes", 10*time.Second); !strings.Contains(out, "kept-58") {
			t.Errorf("after Start it again, ~/notes reads %q; want the file kept", out)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		d := mustClaim(t, p, "mallory", "demo")
		var keep desktop
		p.API(t, "boss", "GET", "/api/vdi/desktops/local/keep-1", &keep)
		for _, c := range []struct {
			name, user, path string
			want             int
		}{
			{"another user's desktop", "eve-laptop", "/api/vdi/desktops/local/" + d.Name + "/start-fresh", 403},
			{"a persistent desktop", "pat", "/api/vdi/desktops/local/" + keep.Name + "/start-fresh", 409},
		} {
			if code := p.API(t, c.user, "POST", c.path, nil); code != c.want {
				t.Errorf("attack start-fresh (%s): %d; want %d", c.name, code, c.want)
			}
		}
	})
}
