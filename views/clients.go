package views

import (
	"slices"
	"strings"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral-vdi-portal/static"
)

// consoleClients returns the data attributes through which a console
// screen finds its protocol modules and browser clients at their hashed
// URLs, and the console it will most likely open (data-likely), which the
// page starts loading while it asks /connect; the console and kiosk pages
// share them.
func consoleClients(p Page, likely string) templ.Attributes {
	return templ.Attributes{
		"data-likely":          likely,
		"data-novnc":           p.Asset(static.NoVNC),
		"data-module-vnc":      p.Asset("bundle/console-vnc.js"),
		"data-module-rdp":      p.Asset("bundle/console-rdp.js"),
		"data-ironrdp":         p.Asset(static.IronRDP),
		"data-ironrdp-backend": p.Asset(static.IronRDPBackend),
		"data-module-xterm":    p.Asset("bundle/console-xterm.js"),
		"data-xterm":           p.Asset(static.XTerm),
		"data-xterm-css":       p.Asset(static.XTermCSS),
		"data-xterm-fit":       p.Asset(static.XTermFit),
		"data-xterm-attach":    p.Asset(static.XTermAttach),
	}
}

// consoleModules returns the modules a console page imports to open the
// console of protocol likely ("rdp", "vnc", "serial", "terminal"), with
// everything they import, for modulepreload links: the browser fetches them
// all at once while the page asks /connect, instead of one level of imports
// after another once it has the answer.
//
// The page's own module (bundle/console.js or bundle/kiosk.js) comes first with
// what it imports (less itself, which its script tag loads): the page asks
// /connect once they have run.
func consoleModules(p Page, page, likely string) []string {
	entries := []string{page}
	switch likely {
	case "rdp":
		entries = append(entries, "bundle/console-rdp.js", static.IronRDP, static.IronRDPBackend)
	case "vnc":
		entries = append(entries, "bundle/console-vnc.js", static.NoVNC)
	case "serial", "terminal":
		entries = append(entries, "bundle/console-xterm.js", static.XTerm, static.XTermFit, static.XTermAttach)
	}
	var out []string
	for _, e := range entries {
		for _, u := range p.modules(e) {
			if u != p.Asset(page) && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// rdpClient returns the RDP client's files, which the home page prefetches
// into the browser's cache while the user picks a pool: its wasm (4 MB)
// and its modules (the RDP console's, with the chunks it imports) are then
// at hand when the console opens.
// Files not embedded (a build without scripts/assets.sh) are left out.
func rdpClient(p Page) []string {
	var out []string
	for _, f := range []string{static.IronRDPWasm, static.IronRDPBackend, static.IronRDP, "bundle/console-rdp.js"} {
		if p.Asset(f) == static.Prefix+f {
			continue
		}
		for _, u := range p.modules(f) {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// keyName and keyLabel split an on-screen key "Name:Label".
func keyName(k string) string  { n, _, _ := strings.Cut(k, ":"); return n }
func keyLabel(k string) string { _, l, _ := strings.Cut(k, ":"); return l }
