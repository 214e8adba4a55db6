package handlers

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// errDraining refuses a new console on a replica that is shutting down;
// the console page reconnects, through the Service, to another replica.
var errDraining = vdi.Errorf(vdi.EUnavailable, "Connect again: another replica of the portal takes it.",
	"This replica of the portal is shutting down and takes no new consoles.")

// Drain makes the handler refuse new consoles (VNC, RDP, terminal, USB)
// while those open go on, and waits until they have all closed or ctx
// ends; it returns how many were still open then. It is for shutdown:
// nothing undoes it.
func (h *Handler) Drain(ctx context.Context) int {
	c := h.consoles
	c.mu.Lock()
	c.draining = true
	if c.total == 0 {
		c.mu.Unlock()
		return 0
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Draining reports whether Drain has begun.
func (h *Handler) Draining() bool {
	h.consoles.mu.Lock()
	defer h.consoles.mu.Unlock()
	return h.consoles.draining
}

// RecheckScreens closes the hubs of desktops whose screens this replica
// held but another replica took meanwhile (console.Screens.Recheck): call
// it when this replica's heartbeat is renewed after it had run out.
func (h *Handler) RecheckScreens(ctx context.Context) {
	h.console.screens.Recheck(ctx)
}

// HandOffScreens gives up the desktops' screens and the shared terminal
// and serial consoles this replica holds, so that the other replicas take
// them over as its drain begins (console.Screens.HandOff,
// console.Streams.HandOff): call it with other replicas to take them.
func (h *Handler) HandOffScreens() {
	h.console.screens.HandOff()
	h.console.shared.HandOff()
}
