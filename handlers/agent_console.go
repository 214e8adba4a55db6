package handlers

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// agentConsole counts conn, an agent's connection to ref's screen, as a
// console of ref's claim while it is open, as runSession does a person's:
// the agent is the holder (the seat joins only for its holder's calls),
// so its work holds off the disconnect grace, confirmed every
// vdi.HeartbeatEvery; closing it, or a release or reclaim (which ends
// the claim's consoles on this replica), starts the grace. It returns
// conn with that done at its close.
func agentConsole(ctx context.Context, ds Desktops, ref vdi.Ref, conn net.Conn, log *slog.Logger) net.Conn {
	beat, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	untrack := ds.TrackConsole(ref, stop)
	if err := ds.ConsoleOpened(ctx, ref); err != nil {
		log.Warn("record an agent's open screen on the claim", "desktop", ref, "err", err)
	}
	conn = connid.OnClose(conn, func() {
		stop(nil)
		if err := ds.ConsoleClosed(context.WithoutCancel(ctx), ref); err != nil {
			log.Warn("record an agent's closed screen on the claim", "desktop", ref, "err", err)
		}
		untrack()
	})
	go func() {
		t := time.NewTicker(vdi.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-beat.Done():
				conn.Close() // released or reclaimed: a no-op once closed
				return
			case <-t.C:
				if err := ds.ConsoleHeartbeat(beat, ref); err != nil && beat.Err() == nil {
					log.Warn("confirm an agent's open screen on the claim", "desktop", ref, "err", err)
				}
			}
		}
	}()
	return conn
}
