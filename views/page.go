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
	// Outage, when set, is what every page says of a part of the portal
	// that does not answer (the Kubernetes API server).
	Outage string
}
