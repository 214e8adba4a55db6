package vdi

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Config configures a Service.
type Config struct {
	Backend Backend
	Leases  Leases
	Audit   AuditLog
	Log     *slog.Logger
	// Now returns the current time; tests inject a clock.
	Now func() time.Time
	// LeaseDuration is how long a claim lasts without renewal (DefaultLeaseDuration).
	LeaseDuration time.Duration
	// Policy holds the reclaim defaults that pools' own policies override.
	Policy Policy
	// MaxDesktopsPerUser is how many desktops one user may hold across
	// all pools; 0 is no limit.
	MaxDesktopsPerUser int
	// LockNamespace is where users' claim locks live (see lockClaims):
	// one namespace every replica can write Leases in. Empty keeps each
	// lock in the namespace of the pool claimed from, which serialises a
	// user's claims per namespace only.
	LockNamespace string
	// Groups resolves groups of users who are not signed in (assign, the
	// dashboard); nil knows none.
	Groups GroupDirectory
	// RefillDelay is how long refilling the warm standby waits after a
	// claim or a release (DefaultRefillDelay; negative: at once).
	RefillDelay time.Duration
	// Samples keeps the pools' samples for the dashboard's charts
	// (SamplePools); nil keeps none.
	Samples SampleStore
	// ClaimWait bounds a claim's own requests to the claim store, not
	// its member's start (DefaultClaimWait).
	ClaimWait time.Duration
	// Replicas names the live replicas, so that each one's claims try
	// its own share of a pool's members first (share); nil: none known,
	// every claim orders them alike.
	Replicas Replicas
	// Shards, when set, runs each user's claims on the replica that holds
	// her shard (claim_shards.go) instead of under her claim lock: every
	// replica must have it, or none. RunShards keeps the holds.
	Shards *ShardConfig
}

// DefaultRefillDelay lets a claimed desktop's console open before the
// standby that replaces it starts: a local desktop's start (Xvnc, its
// window manager and terminal) shares the machine's cores with the
// portal and the desktop just handed out, and took a warm desktop's
// first pixels from 258 to 322 ms (median) on two cores. The kube
// backend's desktops start on the cluster's nodes, and its portal refills
// at once (portal's refillDelay): the wait emptied a morning's standby.
const DefaultRefillDelay = 2 * time.Second

// DefaultClaimWait bounds a claim's requests to the claim store: one
// that keeps refusing (the Kubernetes API server's 429s, which client-go
// waits out and tries again up to 10 times, each wait longer than the
// last) is told to the user within it, not minutes later. A claim takes
// milliseconds to seconds; waiting for a claim lock takes 20 s at most.
const DefaultClaimWait = 30 * time.Second

// Service applies the claim rules: who may have which member, and what
// claiming and releasing do to it.
type Service struct {
	backend   Backend
	leases    Leases
	audit     AuditLog
	log       *slog.Logger
	now       func() time.Time
	duration  time.Duration
	claimWait time.Duration

	policy     Policy
	maxPerUser int
	lockNS     string
	groups     GroupDirectory

	standbyMu     sync.Mutex
	standbyStarts map[Ref]bool            // members being started for standby
	startTimes    map[Ref][]time.Duration // pool -> its last standby starts, newest last
	standbyKick   chan struct{}
	refillDelay   time.Duration
	notifyOnce    sync.Once // RunReclaimer asks for Lease events once, however often it runs

	consolesMu sync.Mutex
	consoleSeq int
	consoles   map[Ref]map[int]trackedConsole // open consoles on this portal

	mirrorMu   sync.Mutex
	mirrorTail map[Ref]chan struct{} // the last mirror write queued per member, done when closed

	changes  claimChanges  // ClaimChanged's channels
	turns    lockTurns     // this portal's claims' turns at their users' claim locks
	trying   trying        // members whose Leases this portal's claims write now
	spread   spread        // the order a claim tries free members in
	shards   *shards       // nil: no claims by shard
	counts   counters      // Counters
	refusals refusals      // members whose reset was refused, when last logged
	marks    markSightings // reclaim marks seen, when they last changed

	samples  SampleStore // nil: no samples kept
	sampling sampler     // SamplePools' counts and last writes

	jobCtx      context.Context // the jobs this portal runs end with it (StopJobs)
	stopJobs    context.CancelFunc
	jobsWG      sync.WaitGroup
	jobsMu      sync.Mutex
	jobsRunning map[string]*job // "ns/pool" -> the job running here
}

// NewService returns a Service; Backend, Leases and Audit are required.
func NewService(cfg Config) *Service {
	s := &Service{
		backend:    cfg.Backend,
		leases:     cfg.Leases,
		audit:      cfg.Audit,
		log:        cfg.Log,
		now:        cfg.Now,
		duration:   cfg.LeaseDuration,
		claimWait:  cfg.ClaimWait,
		policy:     cfg.Policy,
		maxPerUser: cfg.MaxDesktopsPerUser,
		lockNS:     cfg.LockNamespace,
		groups:     cfg.Groups,
		consoles:   map[Ref]map[int]trackedConsole{},

		standbyStarts: map[Ref]bool{},
		startTimes:    map[Ref][]time.Duration{},
		standbyKick:   make(chan struct{}, 1),
		refillDelay:   cfg.RefillDelay,
		jobsRunning:   map[string]*job{},
		samples:       cfg.Samples,
		spread:        spread{maphash.MakeSeed(), cfg.Replicas},
	}
	if cfg.Shards != nil {
		s.shards = newShards(s, cfg.LockNamespace, cfg.Shards)
	}
	s.jobCtx, s.stopJobs = context.WithCancel(context.Background())
	if s.refillDelay == 0 {
		s.refillDelay = DefaultRefillDelay
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.duration == 0 {
		s.duration = DefaultLeaseDuration
	}
	if s.claimWait <= 0 {
		s.claimWait = DefaultClaimWait
	}

	return s
}

// PoolStatus is a pool with its free and claimed counts.
type PoolStatus struct {
	Pool
	Free    int `json:"free"`
	Claimed int `json:"claimed"`
	// Resetting counts the members being stopped or made fresh after
	// their claim ended: neither claimed nor free.
	Resetting int `json:"resetting,omitempty"`
	// Job is the pool's last job (shown to admins only).
	Job *Job `json:"job,omitempty"`
}

// Desktop is a member together with its claim, as users see it.
type Desktop struct {
	Member
	Holder    string    `json:"holder,omitempty"`
	ClaimedAt time.Time `json:"claimedAt,omitzero"`
	// Reclaim is the next reclaim the claim faces, if any rule applies.
	Reclaim *Deadline `json:"reclaim,omitempty"`
	// Console is what its pool's policy allows its consoles.
	Console ConsolePolicy `json:"console"`
	// Recorded says that its consoles are recorded (the pool's policy);
	// RecordInput that keystrokes are too.
	Recorded    bool `json:"recorded,omitempty"`
	RecordInput bool `json:"recordInput,omitempty"`
	// RecordOwn says that its holder may play their own recordings back.
	RecordOwn bool `json:"recordOwn,omitempty"`
	// Mode is its pool's: a persistent desktop that stopped starts again
	// with its disk, an ephemeral one comes back fresh (StartFresh).
	Mode Mode `json:"mode,omitempty"`
	// Resetting names why the member is being stopped or made fresh after
	// its claim ended ("release", "force-release" or a reclaim rule): it
	// is nobody's (no Holder), and nobody can claim it until that is done.
	Resetting string `json:"resetting,omitempty"`
	// Agent, when an agent works in it with its holder's token, names
	// it: "bot:alice/test-runner".
	Agent string `json:"agent,omitempty"`
	// AgentControl names the person who took control from the agent
	// (its input waits until they hand back); AgentStopped the person
	// who stopped it (its calls are refused until they let it go on).
	AgentControl string `json:"agentControl,omitempty"`
	AgentStopped string `json:"agentStopped,omitempty"`
	// AgentRevoked says that the token of the agent stopped was revoked
	// at its Stop: that agent cannot work in it again; letting agents go
	// on (OversightGoOn) lets in others, and the claim names none until
	// one works in it.
	AgentRevoked bool `json:"agentRevoked,omitempty"`
	// AgentToken is the id of the token the agent works with (kept from
	// the answers: only Stop's "revoke the token too" reads it).
	AgentToken string `json:"-"`
	// PersonInputBy and PersonInputAt are the latest input of a person
	// at one of its consoles while an agent works in it, as recorded on
	// the claim (NotePersonInput): the agent's input waits after it.
	PersonInputBy string    `json:"-"`
	PersonInputAt time.Time `json:"-"`
}

// desktop joins a member with its live claim (nil: none) in pool pl. A
// recorded pool's members offer only the consoles the portal records.
func (s *Service) desktop(m Member, l *Lease, pl Pool) Desktop {
	p := pl.Policy
	if p.Record {
		m.Protocols = Recordable(m.Protocols)
	}
	d := Desktop{Member: m, Console: p.Console(), Recorded: p.Record, RecordInput: p.Record && p.RecordInput,
		RecordOwn: p.Record && p.OwnRecordings, Mode: pl.Mode}
	if l == nil {
		return d
	}
	if l.reclaiming() {
		d.Resetting = l.Annotations[AnnotationReclaiming]
		return d
	}
	d.Holder, d.ClaimedAt, d.Agent = l.Holder, l.AcquireTime, l.Annotations[AnnotationAgent]
	d.AgentControl, d.AgentStopped = l.Annotations[AnnotationAgentControl], l.Annotations[AnnotationAgentStopped]
	d.AgentToken, d.AgentRevoked = l.Annotations[AnnotationAgentToken], agentRevoked(l)
	d.PersonInputBy, d.PersonInputAt = personInputOf(l)
	f, _ := FactsOf(l)
	if next, ok := p.Effective(s.policy).Next(l, f, s.now()); ok {
		d.Reclaim = &next
	}
	return d
}

// Recordable returns the protocols of ps the portal can record: all but
// RDP, whose TLS-wrapped stream it does not replay.
func Recordable(ps []Protocol) []Protocol {
	out := make([]Protocol, 0, len(ps))
	for _, p := range ps {
		if p != ProtocolRDP {
			out = append(out, p)
		}
	}
	return out
}

// Pools lists the pools id may use (admins: every pool) with how many
// members are free.
func (s *Service) Pools(ctx context.Context, id Identity) ([]PoolStatus, error) {
	var jobs jobsByPool
	if id.Admin {
		jobs = s.poolJobs(ctx)
	}
	pools, err := s.listedPools(ctx, jobs)
	if err != nil {
		return nil, err
	}
	out := make([]PoolStatus, 0, len(pools))
	for _, p := range pools {
		if !p.Allows(id) {
			continue
		}
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, statusOf(p, held, jobs))
	}
	return out, nil
}

// PoolNamespaces returns the namespaces that have a pool called name,
// whoever may use it (a kiosk link names a pool, not its namespace).
func (s *Service) PoolNamespaces(ctx context.Context, name string) ([]string, error) {
	pools, err := s.listedPools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pools {
		if p.Name == name {
			out = append(out, p.Namespace)
		}
	}
	return out, nil
}

// held returns the pool's live (unexpired) Leases by member name.
func (s *Service) held(ctx context.Context, namespace, pool string) (map[string]*Lease, error) {
	leases, err := s.leases.List(ctx, namespace, pool)
	if err != nil {
		return nil, unavailable(err)
	}
	now := s.now()
	out := make(map[string]*Lease, len(leases))
	for _, l := range leases {
		if !l.Expired(now) {
			out[l.Member] = l
		}
	}
	return out, nil
}

// Desktops returns the members id holds, or every member when all is set
// and id is an admin.
func (s *Service) Desktops(ctx context.Context, id Identity, all bool) ([]Desktop, error) {
	pools, err := s.walkPools(ctx)
	if err != nil {
		return nil, err
	}
	var out []Desktop
	for _, p := range pools {
		for _, m := range p.listed() {
			l := p.held[m.Name]
			mine := l != nil && l.Holder == id.Login && !l.reclaiming()
			if !mine && !(all && id.Admin) || !id.Reaches(p.Namespace, p.Name) {
				continue
			}
			out = append(out, plainFor(id, s.desktop(m, l, p.Pool)))
		}
	}
	return out, nil
}

// Desktop returns one member if id holds it or is an admin.
// A member being reset that is gone meanwhile (see listed) is shown
// stopped and resetting.
func (s *Service) Desktop(ctx context.Context, id Identity, ref Ref) (Desktop, error) {
	m, gone := s.backend.Member(ctx, ref)
	if gone != nil && ErrorCode(gone) != ENotFound {
		return Desktop{}, gone
	}
	l, err := s.authorize(ctx, id, ref)
	switch {
	case gone != nil && (err != nil || l == nil || !l.reclaiming()):
		return Desktop{}, gone
	case err != nil:
		return Desktop{}, err
	case gone != nil:
		m = Member{Namespace: ref.Namespace, Name: ref.Name, Pool: l.Pool, Power: PowerStopped}
	}
	p, err := s.backend.Pool(ctx, ref.Namespace, m.Pool)
	if err != nil {
		return Desktop{}, err
	}
	return plainFor(id, s.desktop(m, l, p)), nil
}

// notResetting fails while d is being reset: powering it meanwhile would
// undo the reset's work.
func (d Desktop) notResetting() error {
	if d.Resetting == "" {
		return nil
	}
	return resettingErr(d.Ref())
}

// resettingErr says that ref is being reset after its claim ended.
func resettingErr(ref Ref) error {
	return Errorf(EConflict, "Wait until it is free again, or pick another.", "Desktop %s is being reset.", ref)
}

// authorize returns ref's live Lease when id holds it; admins pass with
// whatever Lease there is (possibly nil).
func (s *Service) authorize(ctx context.Context, id Identity, ref Ref) (*Lease, error) {
	l, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		l = nil
	} else if err != nil {
		return nil, unavailable(err)
	}
	if l != nil && l.Expired(s.now()) {
		l = nil
	}
	if id.Admin || (l != nil && l.Holder == id.Login) {
		return l, s.checkScope(ctx, id, ref)
	}
	return nil, Errorf(EForbidden, "Get a desktop of your own from its pool on the home page.",
		"Desktop %s is not yours.", ref)
}

// Start powers on a member id holds (or any, for an admin). Starting a
// running member does nothing and is not audited, so that nobody can
// fill the audit log by repeating it. A member slow to start (a VM that
// boots, see StartAsker) is only asked to: the request answers at once,
// and the console page waits for it.
func (s *Service) Start(ctx context.Context, id Identity, ref Ref) error {
	if err := id.May(ScopeClaim); err != nil {
		return err
	}
	d, err := s.Desktop(ctx, id, ref)
	if err != nil {
		return err
	}
	if err := d.notResetting(); err != nil {
		return err
	}
	if d.Power == PowerRunning {
		return nil
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "start", Namespace: ref.Namespace, Target: ref.Name})
	if sa, ok := s.backend.(StartAsker); ok {
		return sa.AskStart(ctx, ref)
	}
	return s.backend.Start(ctx, ref)
}

// Stop powers off a member id holds (or any, for an admin); the claim
// stays. Stopping a stopped member does nothing and is not audited.
func (s *Service) Stop(ctx context.Context, id Identity, ref Ref) error {
	if err := id.May(ScopeClaim); err != nil {
		return err
	}
	d, err := s.Desktop(ctx, id, ref)
	if err != nil {
		return err
	}
	if err := d.notResetting(); err != nil {
		return err
	}
	if d.Power == PowerStopped {
		return nil
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "stop", Namespace: ref.Namespace, Target: ref.Name})
	return s.backend.Stop(ctx, ref)
}

// Authorize fails unless id may open ref's consoles: its holder or an admin.
func (s *Service) Authorize(ctx context.Context, id Identity, ref Ref) error {
	_, err := s.Desktop(ctx, id, ref)
	return err
}

// Dial opens the console stream of a running member. Callers authorize first.
func (s *Service) Dial(ctx context.Context, ref Ref, p Protocol) (net.Conn, error) {
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return nil, err
	}
	if m.Power != PowerRunning {
		return nil, Errorf(EUnavailable, "Start it from the desktop page, then connect again.", "Desktop %s is %s.", ref, m.Power)
	}
	conn, err := s.backend.Dial(ctx, ref, p)
	if err != nil {
		return nil, &Error{Code: EUnavailable, Err: err, Msg: "The console of " + ref.String() + " did not answer.", Hint: "Reconnect; if it keeps failing, stop and start the desktop."}
	}
	return conn, nil
}

// record writes an audit event; a failure is logged, never fatal.
func (s *Service) record(ctx context.Context, e AuditEvent) {
	// What was done is recorded even when its client gave up meanwhile
	// (a job it started goes on).
	if err := s.audit.Record(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit", "action", e.Action, "err", err)
	}
}

// unavailable is err from the claim store as a user sees it: its own
// words when it has them (e.g. the Kubernetes API server out of reach or
// refusing), else that the store did not answer.
func unavailable(err error) error {
	if e := (*Error)(nil); errors.As(err, &e) && e.Code == EUnavailable {
		return err
	}
	return &Error{Code: EUnavailable, Err: err, Msg: "The claim store did not answer.", Hint: "Try again in a moment; an admin should check the portal's logs."}
}
