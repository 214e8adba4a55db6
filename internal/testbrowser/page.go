package testbrowser

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// Screenshot saves a full-page screenshot under output/ in the test's
// package folder (gitignored) and returns its path.
func Screenshot(tb testing.TB, page playwright.Page, name string) string {
	tb.Helper()
	dir := filepath.Join("output", tb.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)}); err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	return path
}

// XtermText is a script returning the text of the xterm.js console (a
// serial console or terminal) on the page.
const XtermText = `() => {
	const t = document.getElementById('screen').xterm;
	if (!t) return '';
	const b = t.buffer.active, out = [];
	for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));
	return out.join('\n');
}`

// WaitXterm waits until the console shows text matching re and returns it.
func WaitXterm(t *testing.T, page playwright.Page, re *regexp.Regexp, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	var text string
	for time.Now().Before(deadline) {
		v, err := page.Evaluate(XtermText)
		if err != nil {
			t.Fatal(err)
		}
		text, _ = v.(string)
		if m := re.FindString(text); m != "" {
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
	Screenshot(t, page, "xterm-timeout")
	t.Fatalf("console did not show %s within %v; it shows:\n%s", re, d, text)
	return ""
}

// RecordStates is a script that has a console page note each text its
// status line and ended card show, in window.seenStates (Said reads
// them); a load of the page again forgets them.
const RecordStates = `() => {
  const status = document.getElementById('status'), card = document.getElementById('ended');
  window.seenStates = [];
  const note = () => window.seenStates.push(status.textContent + (card.hidden ? '' : ' / ' + card.textContent.replace(/\s+/g, ' ').trim()));
  const o = new MutationObserver(note);
  for (const el of [status, card]) o.observe(el, { subtree: true, childList: true, characterData: true, attributes: true });
}`

// Said returns what page said in turn since RecordStates, each text
// once.
func Said(t *testing.T, page playwright.Page) []string {
	t.Helper()
	v, err := page.Evaluate(`() => window.seenStates`)
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := v.([]any)
	if v == nil {
		t.Fatal("the page's record of what it said is gone: it was loaded again; want it to reconnect by itself")
	}
	var said []string
	for _, s := range seen {
		if text, _ := s.(string); len(said) == 0 || said[len(said)-1] != text {
			said = append(said, text)
		}
	}
	return said
}
