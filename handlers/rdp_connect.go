package handlers

// rdpCredentials is a desktop's RDP sign-in, shown only to its holder.
type rdpCredentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// rdpSignIn is implemented by connections to RDP servers whose sign-in the
// backend knows (local desktops); for others the user types it.
type rdpSignIn interface {
	Credentials() (user, password string)
}
