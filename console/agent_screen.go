package console

import (
	"context"
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
// until conn closes or a release or reclaim ends it.
func (s *Sessions) HoldAgent(ctx context.Context, id vdi.Identity, ref vdi.Ref, conn net.Conn) net.Conn {
	agent := id.Agent()
	remove := s.watchers.Add(ref, api.Viewer{User: agent, Role: RoleAgent, Protocol: vdi.ProtocolVNC, Since: time.Now()}, nil)
	return holdConn(ctx, s.cfg.Claims, ref, connid.OnClose(conn, remove), s.cfg.Log.With("agent", agent))
}
