package api

import "time"

// ShareRequest is the body of POST /api/vdi/desktops/{ns}/{member}/shares:
// invite User to the desktop's console, view only unless Control, for
// Expires (a Go duration such as "1h"; empty means an hour, at most a day).
type ShareRequest struct {
	User    string `json:"user"`
	Control bool   `json:"control"`
	Expires string `json:"expires"`
}

// ShareControl is the body of PATCH
// /api/vdi/desktops/{ns}/{member}/shares/{id}: hand control to the
// invitee, or take it back.
type ShareControl struct {
	Control bool `json:"control"`
}

// Share is one invitation to a desktop's console; URL is the page the
// invited user opens (they sign in as anywhere).
type Share struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Control bool      `json:"control"`
	By      string    `json:"by"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	URL     string    `json:"url"`
}
