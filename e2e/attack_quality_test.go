package e2e

import (
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestAttack_VNCQualityStorage: the remembered picture choice lives in the
// browser's localStorage, which another script of the origin, an older
// console or a user with devtools can set to anything. The console takes
// only the values it knows; anything else is Auto, and noVNC is only ever
// given levels from the console's own table.
func TestAttack_VNCQualityStorage(t *testing.T) {
	p, member := mustVNCDesktop(t)
	b := MustLaunchBrowser(t)
	for _, bad := range []string{"99", "-1", "<img src=x onerror=alert(1)>", "constructor", "__proto__", ""} {
		t.Run(bad, func(t *testing.T) {
			page := b.MustNewPage(t, 1280, 800)
			must(t, page.Context().AddInitScript(playwright.Script{Content: playwright.String(`localStorage.setItem('corral.vnc.quality', ` + jsString(bad) + `)`)}))
			expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
			signIn(t, page, p, "alice", "/desktops/local/"+member+"?protocol=vnc")
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			// Auto resolves by the link it measures (a loaded machine's
			// loopback can measure slow): either way only the table's levels.
			waitQuality(t, page, "auto sharp 8 2", "auto fast 3 2")
		})
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	out := []byte{'\''}
	for _, r := range s {
		if r == '\'' || r == '\\' || r < ' ' || r == '<' || r == '>' {
			out = append(out, []byte(`\u00`+string("0123456789abcdef"[r>>4])+string("0123456789abcdef"[r&15]))...)
			continue
		}
		out = append(out, string(r)...)
	}
	return string(append(out, '\''))
}
