package handlers

import (
	"context"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// rdpProbeTimeout bounds how long /connect waits for an RDP server.
const rdpProbeTimeout = 2 * time.Second

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

// prepareRDP fills in what IronRDP needs to connect to d: a token for the
// gateway, the destination, and the sign-in when the backend knows it and
// id holds d. It connects to the RDP server to do so and reports whether it
// answered; when it did not, the caller offers the other consoles.
func (h *Handler) prepareRDP(ctx context.Context, id vdi.Identity, d vdi.Desktop, o *connectOption) bool {
	ctx, cancel := context.WithTimeout(ctx, rdpProbeTimeout)
	defer cancel()
	conn, err := h.desktops.Dial(ctx, d.Ref(), vdi.ProtocolRDP)
	if err != nil {
		h.log.Warn("rdp server not answering; offering other consoles", "desktop", d.Ref(), "err", err)
		return false
	}
	if c, ok := conn.(rdpSignIn); ok && d.Holder == id.Login {
		u, p := c.Credentials()
		o.Credentials = &rdpCredentials{Username: u, Password: p}
	}
	conn.Close()
	o.Token = rdpTokenIssuer.mint(id.Login, d.Ref())
	o.Destination = rdpDestination(d.Ref())
	return true
}
