package handlers

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestWatchers_WatchingOnAnyReplica: the audio socket's consent check
// sees a watch on another replica (read over a signed peer request), and
// neither a watch still asking there nor a user who watches nowhere.
func TestWatchers_WatchingOnAnyReplica(t *testing.T) {
	e := mustTestEnv(t, testEnvConfig{})
	secret := []byte("a-peer-secret-of-thirty-two-byte")
	other := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, Console: ConsoleConfig{PeerSecret: secret}})
	srv := httptest.NewServer(other)
	defer srv.Close()
	h := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, Console: ConsoleConfig{PeerSecret: secret,
		FindPeers: func(context.Context) []string { return []string{srv.URL} }}})
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	defer other.console.sessions.Watchers().Add(ref, api.Viewer{User: "ops", Role: "watch", Protocol: vdi.ProtocolVNC}, nil)()
	defer other.console.sessions.Watchers().Add(ref, api.Viewer{User: "boss", Role: "asks", Protocol: vdi.ProtocolVNC}, nil)()
	for user, want := range map[string]bool{"ops": true, "boss": false, "carol": false} {
		if got := h.console.watchingAnywhere(context.Background(), ref, user); got != want {
			t.Errorf("watchingAnywhere(%s) = %v; want %v", user, got, want)
		}
	}
}
