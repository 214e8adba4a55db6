// Package agent is the agent seat: an MCP server (the official Go SDK,
// Streamable HTTP) through which an agent holding a personal access token
// claims a desktop, sees its screen, types, points and releases it, under
// the rules a person meets. The agent's picture and input go through the
// desktop's screen hub as a control client, so watchers see it work and
// its input counts against idle reclaim; every tool call is audited and
// each token's calls are rate limited.
package agent

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Desktops is what the agent seat needs of the claim service.
type Desktops interface {
	Pools(ctx context.Context, id vdi.Identity) ([]vdi.PoolStatus, error)
	Claim(ctx context.Context, id vdi.Identity, namespace, pool string) (vdi.Desktop, error)
	Desktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, error)
	Desktops(ctx context.Context, id vdi.Identity, all bool) ([]vdi.Desktop, error)
	Release(ctx context.Context, id vdi.Identity, ref vdi.Ref, reason string) error
	Input(ctx context.Context, ref vdi.Ref, at time.Time) error
	MarkAgent(ctx context.Context, id vdi.Identity, ref vdi.Ref) error
	NotePersonInput(ctx context.Context, ref vdi.Ref, login string, at time.Time) error
	// ClaimChanged is closed at the next change of ref's claim made on
	// any replica (nil where one process holds every claim).
	ClaimChanged(ref vdi.Ref) <-chan struct{}
}

// Config configures the agent seat.
type Config struct {
	Desktops Desktops
	// Join opens a control client's connection to a desktop's screen hub.
	Join Join
	// Audit records every tool call.
	Audit vdi.AuditLog
	Log   *slog.Logger
	// InputRate and ScreenRate bound each token's input calls and
	// screenshots per second (20 and 4); bursts are five times that.
	InputRate, ScreenRate float64
	// MaxDesktops caps the desktops one user's agents work in at once,
	// across every token and replica (0: no cap).
	MaxDesktops int
	// SeatIdle is how long an agent's screen of a desktop stays open
	// after its last call (0: DefaultSeatIdle).
	SeatIdle time.Duration
}

// Seat serves /mcp.
type Seat struct {
	cfg     Config
	seats   seats
	schemas *mcp.SchemaCache
	handler http.Handler

	mu      sync.Mutex
	limits  map[string]*tokenLimits          // by token id
	inputs  map[vdi.Ref]time.Time            // when input was last written to the claim
	people  map[vdi.Ref]personInput          // a person's latest input, which suspends the agent's
	flights map[vdi.Ref]map[*flight]struct{} // the calls in flight on each desktop
}

type tokenLimits struct{ input, screen *rate.Limiter }

// serverKey carries, on a request, the MCP server of its identity.
type serverKey struct{}

// New returns the agent seat.
func New(cfg Config) *Seat {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.InputRate <= 0 {
		cfg.InputRate = 20
	}
	if cfg.ScreenRate <= 0 {
		cfg.ScreenRate = 4
	}
	if cfg.SeatIdle <= 0 {
		cfg.SeatIdle = DefaultSeatIdle
	}
	s := &Seat{cfg: cfg, seats: seats{join: cfg.Join, idle: cfg.SeatIdle}, schemas: mcp.NewSchemaCache(), limits: map[string]*tokenLimits{}, inputs: map[vdi.Ref]time.Time{}}
	s.handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return srv
	}, &mcp.StreamableHTTPOptions{Stateless: true, Logger: cfg.Log})
	return s
}

// Serve answers one MCP request of id (a token's identity): the request
// is served by a server whose tools act as id alone. It returns once the
// work its tool calls started beside their answers is done too (a claim's
// lock let go: after_answer.go).
func (s *Seat) Serve(w http.ResponseWriter, r *http.Request, id vdi.Identity) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral-vdi-portal", Title: "corral VDI agent seat"}, &mcp.ServerOptions{SchemaCache: s.schemas,
		Instructions: "Claim a desktop of a pool with claim_desktop, look with screenshot, act with click, type_text and press_keys, wait_for_change instead of polling, and release_desktop when done. The resource corral://desktops (and corral://desktops/{namespace}/{member}) tells the state of the desktops you hold."})
	s.addTools(srv, id)
	s.addResources(srv, id)
	ctx, waitAlongside := withAlongside(r.Context())
	defer waitAlongside() // once the SDK has written the answer
	s.handler.ServeHTTP(w, r.WithContext(context.WithValue(ctx, serverKey{}, srv)))
}

// limitsOf returns the token's rate limits.
func (s *Seat) limitsOf(id vdi.Identity) *tokenLimits {
	key := id.Login
	if id.Token != nil {
		key = id.Token.ID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limits[key]
	if l == nil {
		if len(s.limits) > 4096 {
			clear(s.limits)
		}
		l = &tokenLimits{input: rate.NewLimiter(rate.Limit(s.cfg.InputRate), int(5*s.cfg.InputRate)),
			screen: rate.NewLimiter(rate.Limit(s.cfg.ScreenRate), int(5*s.cfg.ScreenRate))}
		s.limits[key] = l
	}
	return l
}

// noteInput tells the claim of ref about input, every few seconds at
// most, so that idle reclaim counts the agent's input as a person's.
func (s *Seat) noteInput(ctx context.Context, ref vdi.Ref) {
	now := time.Now()
	s.mu.Lock()
	last := s.inputs[ref]
	fresh := now.Sub(last) >= 5*time.Second
	if fresh {
		s.inputs[ref] = now
	}
	s.mu.Unlock()
	if !fresh {
		return
	}
	if err := s.cfg.Desktops.Input(ctx, ref, now); err != nil {
		s.cfg.Log.Warn("agent input not recorded on the claim", "desktop", ref, "err", err)
	}
}
