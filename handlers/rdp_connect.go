package handlers

// rdpSignIn is implemented by connections to RDP servers whose sign-in the
// backend knows (local desktops); for others the user types it.
type rdpSignIn interface {
	Credentials() (user, password string)
}
