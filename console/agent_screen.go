package console

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// RoleAgent is an agent's role among a desktop's viewers (api.Viewer).
const RoleAgent = "agent"

// HoldAgent keeps conn, the screen connection of the agent with token
// identity id on ref (the agent seat's), as a console of ref: listed
// among its viewers, so that the holder's page shows the agent live,
// and held open on the claim as the holder's consoles are (the agent is
// the holder's: its work holds off the disconnect grace), beyond ctx,
// until conn closes, a release or reclaim ends it, or the claim, changed
// on any replica, no longer lets the agent work there (keepAgent).
func (s *Sessions) HoldAgent(ctx context.Context, id vdi.Identity, ref vdi.Ref, conn net.Conn) net.Conn {
	log := s.cfg.Log.With("agent", id.Agent(), "desktop", ref)
	remove := s.watchers.Add(ref, api.Viewer{User: id.Agent(), Role: RoleAgent, Protocol: vdi.ProtocolVNC, Since: time.Now()}, nil)
	ctx, end := context.WithCancelCause(context.WithoutCancel(ctx))
	go keepAgent(ctx, s.cfg.Claims, id, ref, end, log)
	return holdConn(ctx, end, s.cfg.Claims, ref, connid.OnClose(conn, remove), log)
}

// AgentChecker is what keepAgent reads of the claim service.
type AgentChecker interface {
	Desktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, error)
	ClaimChanged(ref vdi.Ref) <-chan struct{}
}

// keepAgent ends an agent's screen (cancel) once ref's claim no longer
// lets agent id work there, whichever replica changed it: a person
// stopped the agent (vdi.Desktop.AgentStopped; a revoke of its token at
// Stop comes with one), or the desktop is no longer id's user's. As an
// invitee's console ends with its invitation (KeepShared), it checks at
// once and at each change of the claim (vdi.Service.ClaimChanged) until
// ctx ends. A claim store that reports no changes (one replica) leaves
// it to the seat, which closes a stopped agent's screen on the replica
// the stop went through.
func keepAgent(ctx context.Context, claims AgentChecker, id vdi.Identity, ref vdi.Ref, cancel context.CancelCauseFunc, log *slog.Logger) {
	for {
		changed := claims.ClaimChanged(ref) // before the check: a change during it wakes the wait
		if changed == nil {
			return
		}
		d, err := claims.Desktop(ctx, id, ref)
		var why string
		switch code := vdi.ErrorCode(err); {
		case ctx.Err() != nil:
			return
		case err == nil && d.AgentStopped != "":
			why = d.AgentStopped + " stopped the agent"
		case err == nil && d.Holder != id.Login, code == vdi.EForbidden, code == vdi.ENotFound:
			why = "the desktop is no longer " + id.Login + "'s"
		}
		if why != "" {
			log.Info("agent's screen closed", "why", why)
			cancel(errors.New(why))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
