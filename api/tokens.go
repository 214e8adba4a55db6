package api

import "time"

// TokenRequest is the body of POST /api/vdi/tokens: a personal access
// token called Name for the pools listed ("ns/pool", or "*" for every
// pool the user may use), living Expires (a Go duration such as "720h").
// User and Admin are an admin's: a token for a service user, an admin
// token.
type TokenRequest struct {
	Name    string   `json:"name"`
	Pools   []string `json:"pools"`
	Expires string   `json:"expires"`
	// Scopes are the actions the token may take: "see", "act", "claim";
	// none named is all three.
	Scopes []string `json:"scopes,omitempty"`
	User   string   `json:"user,omitempty"`
	Admin  bool     `json:"admin,omitempty"`
}

// Token is a personal access token as the portal lists it. Token, the
// secret, is there only in the answer to its creation: it is shown once.
type Token struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	User     string    `json:"user"`
	Pools    []string  `json:"pools"`
	Scopes   []string  `json:"scopes"`
	Admin    bool      `json:"admin,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"lastUsed,omitzero"`
	Token    string    `json:"token,omitempty"`
}
