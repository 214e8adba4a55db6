package e2e

import (
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// clipboardWhileTyping drives the clipboard panel's box while it has the
// focus: what the desktop copies shows at once while the box holds what
// the desktop gave it, lines and all; once the user edits the box, the
// desktop's next copy waits until they leave it, and the note says so.
// The panel is open on page.
func clipboardWhileTyping(t *testing.T, page playwright.Page, shell *guestShell) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	box := page.GetByTestId("clipboard-text")
	must(t, box.Focus())
	shell.run("printf 'first line\\nsecond line\\n' | xclip -i -selection clipboard")
	must(t, expect.Locator(box).ToHaveValue("first line\nsecond line\n"))
	shell.run("echo after the lines | xclip -i -selection clipboard")
	must(t, expect.Locator(box).ToHaveValue("after the lines\n"))

	must(t, box.Press("End"))
	must(t, box.PressSequentially(" and mine"))
	shell.run("echo while you type | xclip -i -selection clipboard")
	note := page.GetByTestId("clipboard-note")
	must(t, expect.Locator(note).ToContainText("shows here when you leave this box"))
	must(t, expect.Locator(box).ToHaveValue("after the lines\n and mine"))
	must(t, box.Blur())
	must(t, expect.Locator(box).ToHaveValue("while you type\n"))
}
