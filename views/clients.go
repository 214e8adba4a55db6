package views

import (
	"strings"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral-vdi-portal/static"
)

// consoleClients returns the data attributes through which a console
// screen finds its protocol modules and browser clients at their hashed
// URLs; the console and kiosk pages share them.
func consoleClients(p Page) templ.Attributes {
	return templ.Attributes{
		"data-novnc":           p.Asset(static.NoVNC),
		"data-module-vnc":      p.Asset("app/console-vnc.js"),
		"data-module-rdp":      p.Asset("app/console-rdp.js"),
		"data-ironrdp":         p.Asset(static.IronRDP),
		"data-ironrdp-backend": p.Asset(static.IronRDPBackend),
		"data-module-xterm":    p.Asset("app/console-xterm.js"),
		"data-xterm":           p.Asset(static.XTerm),
		"data-xterm-css":       p.Asset(static.XTermCSS),
		"data-xterm-fit":       p.Asset(static.XTermFit),
		"data-xterm-attach":    p.Asset(static.XTermAttach),
	}
}

// keyName and keyLabel split an on-screen key "Name:Label".
func keyName(k string) string  { n, _, _ := strings.Cut(k, ":"); return n }
func keyLabel(k string) string { _, l, _ := strings.Cut(k, ":"); return l }
