// Package views renders the portal's HTML pages with templ: one file per
// page plus the layout. Views take typed props and know nothing of storage
// or HTTP handlers.
package views

import "github.com/corral-dev/corral-vdi-portal/vdi"

// Page is what every page's layout needs.
type Page struct {
	Title string
	// User is the signed-in identity; empty Login on the sign-in page.
	User vdi.Identity
	// Asset maps a static file's path to its hashed URL.
	Asset func(path string) string
	// Modules maps an ES module's path to the hashed URLs of it and of
	// every module it imports statically, for modulepreload links; nil
	// gives the module alone.
	Modules func(path string) []string
	// Outage, when set, is what every page says of a part of the portal
	// that does not answer (the Kubernetes API server).
	Outage string
}

// modules returns the URLs of the module at path and of its static imports.
func (p Page) modules(path string) []string {
	if p.Modules == nil {
		return []string{p.Asset(path)}
	}
	return p.Modules(path)
}
