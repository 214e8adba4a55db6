package handlers

import (
	"net"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// clipboardFilter applies desktop d's clipboard policy to a VNC console's
// stream: the relay drops the cut texts the policy forbids (and bounds the
// rest), so a page that ignores the policy still cannot carry text. Each
// drop is logged. Terminals and RDP are not filtered here: see README,
// "Clipboard and file transfer".
func (h *Handler) clipboardFilter(conn net.Conn, d vdi.Desktop, p vdi.Protocol, login string) net.Conn {
	if p != vdi.ProtocolVNC {
		return conn
	}
	c := d.Console.Clipboard
	log := h.log.With("desktop", d.Ref(), "user", login, "clipboard", c)
	return relay.FilterRFBClipboard(conn, relay.RFBClipboardConfig{
		ToDesktop:   c.ToDesktop(),
		FromDesktop: c.FromDesktop(),
		OnDrop: func(x relay.ClipboardDrop) {
			log.Info("clipboard dropped", "direction", x.Direction, "reason", x.Reason, "messages", x.Count, "bytes", x.Bytes)
		},
	})
}
