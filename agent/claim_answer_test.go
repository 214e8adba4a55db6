package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimDesktop_AnswersBeforeLockLetGo: the agent's claim_desktop lets
// its user's claim lock go beside joining the desktop's screen, not after
// it (the join can take seconds, and the lock holds her next claim), and
// its answer, which the MCP SDK writes, does not wait for the lock's
// delete. The stand-in pool has no screens, so the answer is the join's
// error, after a claim that won.
func TestClaimDesktop_AnswersBeforeLockLetGo(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := leasetest.NewLockDeleteAwaits(db.Leases())
	log := slog.New(slog.DiscardHandler)
	svc := vdi.NewService(vdi.Config{Backend: leasetest.NewPool("local", "mcp", 1, 1), Leases: leases, Audit: db, Log: log})
	lockHeldAtJoin := make(chan bool, 1)
	seat := New(Config{Desktops: svc, Audit: db, Log: log, Join: func(context.Context, vdi.Identity, vdi.Ref) (net.Conn, error) {
		select {
		case <-leases.Started:
			lockHeldAtJoin <- false
		case <-time.After(10 * time.Second):
			lockHeldAtJoin <- true
		}
		return nil, errors.New("the stand-in pool has no screens")
	}})
	alice := vdi.Identity{Login: "alice", Token: &vdi.TokenScope{ID: "t1", Name: "agent", Pools: []string{vdi.AllPools}, Scopes: vdi.Scopes}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seat.Serve(w, r, alice) }))
	defer srv.Close()

	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "claim_desktop", Arguments: map[string]any{"pool": "local/mcp"}})
	close(leases.Read)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); !res.IsError || !strings.Contains(got, "no screens") {
		t.Fatalf("claim_desktop answered %q; want the join's error", got)
	}
	if held, err := svc.Desktops(ctx, alice, false); err != nil || len(held) != 1 || held[0].Name != "mcp-1" {
		t.Fatalf("alice holds %v, %v; want mcp-1, which her claim won", held, err)
	}
	if <-lockHeldAtJoin {
		t.Error("claim_desktop joined the screen with alice's claim lock still held (no delete in 10 s); want it let go beside the join")
	}
	if first := <-leases.Unlocked; !first {
		t.Error("claim_desktop's answer came only after the claim lock's delete gave up waiting; want the answer first")
	}
}

// textOf returns a tool result's text.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
