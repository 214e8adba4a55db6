package portal

import (
	"context"
	"net"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/handlers"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// openScreens records desktops' screen owners in Leases when replicas
// share a cluster and the peer secret (screen links are on by default
// with it); nil otherwise: this portal holds its desktops' screens alone
// (console.LocalOwners).
func (m *Main) openScreens() {
	if m.kube == nil || len(m.Config.Console.PeerSecret) == 0 {
		return
	}
	m.screens = kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: m.kube, Namespace: m.Config.Kube.Namespace, Identity: m.identity, Log: m.Log})
}

// screenOwners is m.screens as console.Owners, nil without.
func (m *Main) screenOwners() console.Owners {
	if m.screens == nil {
		return nil
	}
	return m.screens
}

// replicas is m.screens as vdi.Replicas (the replicas' claims split
// the members by their heartbeats), nil without.
func (m *Main) replicas() vdi.Replicas {
	if m.screens == nil {
		return nil
	}
	return m.screens
}

// claimShards turns on claims by shard (vdi.ShardConfig) where replicas
// share a cluster and the peer secret, as screens do, and the others can
// reach this one (CORRAL_VDI_PEER_URL, or a listen address that names a
// host: advertise): every replica of a release has the same settings, so
// all or none run claims by shard. Without a way to reach the replica
// holding a user's shard, the others could not forward her claims.
func (m *Main) claimShards() *vdi.ShardConfig {
	if m.screens == nil {
		return nil
	}
	if host, _, err := net.SplitHostPort(m.Config.Server.Listen); m.Config.Console.PeerURL == "" && (err != nil || host == "" || net.ParseIP(host).IsUnspecified()) {
		m.Log.Warn("claims keep their users' claim locks (three writes each): set CORRAL_VDI_PEER_URL so that each user's claims run on one replica with one write")
		return nil
	}
	return &vdi.ShardConfig{URL: m.screens.URL, Forward: handlers.TakeForwarder{Secret: m.Config.Console.PeerSecret}}
}

// findPeers finds the peer portals: the other replicas, by their
// heartbeats; nil without screen owners.
func (m *Main) findPeers() func(ctx context.Context) []string {
	if m.screens == nil {
		return nil
	}
	return m.screens.Peers
}

// advertise tells m.screens where the other replicas reach this one:
// CORRAL_VDI_PEER_URL, else the listen address when it names a host.
func (m *Main) advertise() {
	if m.screens == nil {
		return
	}
	u := m.Config.Console.PeerURL
	if u == "" {
		if host, _, err := net.SplitHostPort(m.ln.Addr().String()); err == nil && !net.ParseIP(host).IsUnspecified() {
			u = m.URL()
		}
	}
	if u == "" {
		m.Log.Warn("other replicas cannot relay to this one's screens: set CORRAL_VDI_PEER_URL (e.g. http://$(POD_IP):8080)", "listen", m.ln.Addr().String())
	}
	m.screens.SetURL(u)
	m.Log.Info("screen owners in Leases", "namespace", m.Config.Kube.Namespace, "replica", m.identity, "peerURL", u)
}

// runScreens keeps this replica's screen heartbeat until ctx ends and
// closes done then; after a lapse of it, it has the handler give up the
// screens other replicas took meanwhile.
func (m *Main) runScreens(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if m.screens == nil {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.screens.Lapsed():
				m.handler.RecheckScreens(ctx)
			}
		}
	}()
	m.screens.Run(ctx)
}
