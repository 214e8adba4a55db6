package e2e

import "github.com/corral-dev/corral-vdi-portal/internal/testbrowser"

// The e2e package's names for the browser harness it shares with the
// kube package (internal/testbrowser): a headless Debian Chromium driven
// by Playwright.
type Browser = testbrowser.Browser

var (
	// MustLaunchBrowser starts Playwright's driver and Chromium.
	MustLaunchBrowser = testbrowser.MustLaunch
	// MustLaunchBrowserWith is MustLaunchBrowser with extra Chromium flags
	// (e.g. --host-resolver-rules).
	MustLaunchBrowserWith = testbrowser.MustLaunch
	// MustLaunchProfile starts Chromium on a profile of its own, kept on
	// disk like a user's browser.
	MustLaunchProfile = testbrowser.MustLaunchProfile
	// keepBrowserErrors logs the page's console errors when the test fails.
	keepBrowserErrors = testbrowser.KeepErrors
	// screenshot saves a full-page screenshot under e2e/output/
	// (gitignored) and returns its path.
	screenshot = testbrowser.Screenshot
	// waitXterm waits until the xterm.js console shows text matching re.
	waitXterm = testbrowser.WaitXterm
	// pageSaid returns what a console page said in turn since
	// recordStates.
	pageSaid = testbrowser.Said
	// canvasPNG returns the canvas under a selector as an image.
	canvasPNG = testbrowser.CanvasPNG
	// differingPixels counts the pixels where two images differ.
	differingPixels = testbrowser.DifferingPixels
)

// xtermText returns the text of the xterm.js console on the page.
const xtermText = testbrowser.XtermText

// recordStates has a console page note each text its status line and
// ended card show.
const recordStates = testbrowser.RecordStates
