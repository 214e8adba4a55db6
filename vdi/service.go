package vdi

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
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
}

// Service applies the claim rules: who may have which member, and what
// claiming and releasing do to it.
type Service struct {
	backend  Backend
	leases   Leases
	audit    AuditLog
	log      *slog.Logger
	now      func() time.Time
	duration time.Duration

	policy Policy

	claimMu sync.Mutex
	claimBy map[string]*sync.Mutex // per user and pool: one claim at a time

	consolesMu sync.Mutex
	consoleSeq int
	consoles   map[Ref]map[int]context.CancelCauseFunc // open consoles on this portal
}

// NewService returns a Service; Backend, Leases and Audit are required.
func NewService(cfg Config) *Service {
	s := &Service{
		backend:  cfg.Backend,
		leases:   cfg.Leases,
		audit:    cfg.Audit,
		log:      cfg.Log,
		now:      cfg.Now,
		duration: cfg.LeaseDuration,
		policy:   cfg.Policy,
		claimBy:  map[string]*sync.Mutex{},
		consoles: map[Ref]map[int]context.CancelCauseFunc{},
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
	return s
}

// PoolStatus is a pool with its free and claimed counts.
type PoolStatus struct {
	Pool
	Free    int `json:"free"`
	Claimed int `json:"claimed"`
}

// Desktop is a member together with its claim, as users see it.
type Desktop struct {
	Member
	Holder    string    `json:"holder,omitempty"`
	ClaimedAt time.Time `json:"claimedAt,omitzero"`
	// Reclaim is the next reclaim the claim faces, if any rule applies.
	Reclaim *Deadline `json:"reclaim,omitempty"`
}

// desktop joins a member with its live claim (nil: none) under policy p.
func (s *Service) desktop(m Member, l *Lease, p Policy) Desktop {
	d := Desktop{Member: m}
	if l == nil {
		return d
	}
	d.Holder, d.ClaimedAt = l.Holder, l.AcquireTime
	f, _ := FactsOf(l)
	if next, ok := p.Effective(s.policy).Next(l, f, s.now()); ok {
		d.Reclaim = &next
	}
	return d
}

// Pools lists every pool with how many members are free.
func (s *Service) Pools(ctx context.Context) ([]PoolStatus, error) {
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PoolStatus, 0, len(pools))
	for _, p := range pools {
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, PoolStatus{Pool: p, Claimed: len(held), Free: max(p.Size-len(held), 0)})
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

// Claim gives id a member of the pool and powers it on. Asking again returns
// the same member. It prefers a running member, then a stopped one, trying
// each at most once and moving on when another claimant wins it; when none is
// free (or every try was lost) it fails with EConflict.
func (s *Service) Claim(ctx context.Context, id Identity, namespace, pool string) (Desktop, error) {
	mu := s.claimLock(namespace + "/" + pool + "/" + id.Login)
	mu.Lock()
	defer mu.Unlock()

	p, err := s.backend.Pool(ctx, namespace, pool)
	if err != nil {
		return Desktop{}, err
	}
	tried := map[string]bool{}
	for attempts := 0; attempts < maxClaimAttempts; {
		// Listing is cheap (a cache on Kubernetes), so every round sees the
		// claims that beat this one and skips their members.
		leases, err := s.leases.List(ctx, namespace, pool)
		if err != nil {
			return Desktop{}, unavailable(err)
		}
		now := s.now()
		known := make(map[string]*Lease, len(leases))
		for _, l := range leases {
			if l.Holder == id.Login && !l.Expired(now) {
				// Asking again also finishes what a failure left undone.
				if err := s.mirror(ctx, l); err != nil {
					return Desktop{}, err
				}
				return s.powerOn(ctx, l)
			}
			known[l.Member] = l
		}
		members, err := s.backend.Members(ctx, namespace, pool)
		if err != nil {
			return Desktop{}, err
		}
		free := freeMembers(members, known, tried, now)
		if len(free) == 0 {
			break
		}
		for _, m := range free {
			if attempts == maxClaimAttempts {
				break
			}
			attempts++
			tried[m.Name] = true
			l, err := s.acquire(ctx, p, m, known[m.Name], id.Login)
			if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
				// Lost the race for this member: its claim is someone else's
				// now. After a few losses, look again at what is left.
				if attempts%claimRelistEvery == 0 {
					break
				}
				continue
			} else if err != nil {
				return Desktop{}, unavailable(err)
			}
			s.record(ctx, AuditEvent{Actor: id.Login, Action: "claim", Namespace: namespace, Target: m.Name, Detail: "pool " + pool})
			s.log.Info("claimed", "desktop", m.Ref(), "holder", id.Login)
			if err := s.mirror(ctx, l); err != nil {
				return Desktop{}, err
			}
			return s.powerOn(ctx, l)
		}
	}
	return Desktop{}, Errorf(EConflict, "Try again later, or ask an admin to free one.", "No free desktops in pool %s.", pool)
}

// Claim bounds: each member is tried at most once per claim and at most
// maxClaimAttempts in all; the free list is refreshed after every
// claimRelistEvery lost races.
const (
	maxClaimAttempts = 64
	claimRelistEvery = 4
)

// freeMembers returns the members with no live claim that were not tried
// yet: running ones first (the user gets a desktop now), then stopped ones,
// then the rest; shuffled within each group so that claimants on several
// portals do not all race for the same member.
func freeMembers(members []Member, known map[string]*Lease, tried map[string]bool, now time.Time) []Member {
	rank := func(p Power) int {
		switch p {
		case PowerRunning:
			return 0
		case PowerStopped:
			return 1
		case PowerFailed:
			return 3
		}
		return 2
	}
	var free []Member
	for _, m := range members {
		if l := known[m.Name]; (l != nil && !l.Expired(now)) || tried[m.Name] {
			continue
		}
		free = append(free, m)
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	slices.SortStableFunc(free, func(a, b Member) int { return rank(a.Power) - rank(b.Power) })
	return free
}

// ClaimMirror is implemented by backends that show a claim on the member
// itself for other tools: on Kubernetes the VM's corral.dev/vdi-assigned-to
// label and corral.dev/vdi-claimed-at annotation. It is presentation; the
// Lease stays the truth. An empty holder clears the mirror.
type ClaimMirror interface {
	MirrorClaim(ctx context.Context, ref Ref, holder string, claimedAt time.Time) error
}

// mirror shows l on its member when the backend can. A failure keeps the
// claim (no one else may get a half-made desktop) and tells the holder,
// whose retry mirrors again.
func (s *Service) mirror(ctx context.Context, l *Lease) error {
	cm, ok := s.backend.(ClaimMirror)
	if !ok {
		return nil
	}
	if err := cm.MirrorClaim(ctx, l.Ref(), l.Holder, l.AcquireTime); err != nil {
		s.log.Error("mirror claim", "desktop", l.Ref(), "holder", l.Holder, "err", err)
		return &Error{Code: EUnavailable, Err: err,
			Msg:  "Desktop " + l.Ref().String() + " is yours but could not be marked as yours.",
			Hint: "Try again; if it keeps failing, ask an admin."}
	}
	return nil
}

// acquire takes m's Lease for holder: Create when none was seen (a Lease
// that exists after all means another claimant won: ErrAlreadyExists), or
// Update carrying the observed resourceVersion of old when it expired (a
// newer Lease means another claimant won: ErrConflict).
func (s *Service) acquire(ctx context.Context, p Pool, m Member, old *Lease, holder string) (*Lease, error) {
	now := s.now()
	want := &Lease{
		Namespace: m.Namespace, Member: m.Name, Pool: p.Name, Holder: holder,
		AcquireTime: now, RenewTime: now, Duration: s.duration,
	}
	if old == nil {
		return s.leases.Create(ctx, want)
	}
	if !old.Expired(now) {
		return nil, ErrConflict
	}
	want.ResourceVersion = old.ResourceVersion
	l, err := s.leases.Update(ctx, want)
	if err == nil {
		s.record(ctx, AuditEvent{Actor: holder, Action: "takeover", Namespace: m.Namespace, Target: m.Name, Detail: "expired claim of " + old.Holder})
	}
	return l, err
}

// powerOn starts the claimed member if it is not running and returns it.
// A failed start keeps the claim so that asking again retries.
func (s *Service) powerOn(ctx context.Context, l *Lease) (Desktop, error) {
	m, err := s.backend.Member(ctx, l.Ref())
	if err != nil {
		return Desktop{}, err
	}
	if m.Power != PowerRunning {
		if err := s.backend.Start(ctx, l.Ref()); err != nil {
			s.log.Error("start failed", "desktop", l.Ref(), "err", err)
			return Desktop{}, &Error{Code: EUnavailable, Err: err,
				Msg:  "Desktop " + l.Ref().String() + " is yours but did not start.",
				Hint: "Try again; if it keeps failing, release it and get another, or ask an admin."}
		}
		if m, err = s.backend.Member(ctx, l.Ref()); err != nil {
			return Desktop{}, err
		}
	}
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	if err != nil {
		return Desktop{}, err
	}
	return s.desktop(m, l, p.Policy), nil
}

// Desktops returns the members id holds, or every member when all is set
// and id is an admin.
func (s *Service) Desktops(ctx context.Context, id Identity, all bool) ([]Desktop, error) {
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return nil, err
	}
	var out []Desktop
	for _, p := range pools {
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		members, err := s.backend.Members(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			l := held[m.Name]
			mine := l != nil && l.Holder == id.Login
			if !mine && !(all && id.Admin) {
				continue
			}
			out = append(out, s.desktop(m, l, p.Policy))
		}
	}
	return out, nil
}

// Desktop returns one member if id holds it or is an admin.
func (s *Service) Desktop(ctx context.Context, id Identity, ref Ref) (Desktop, error) {
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return Desktop{}, err
	}
	l, err := s.authorize(ctx, id, ref)
	if err != nil {
		return Desktop{}, err
	}
	p, err := s.backend.Pool(ctx, ref.Namespace, m.Pool)
	if err != nil {
		return Desktop{}, err
	}
	return s.desktop(m, l, p.Policy), nil
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
		return l, nil
	}
	return nil, Errorf(EForbidden, "Get a desktop of your own from its pool on the home page.",
		"Desktop %s is not yours.", ref)
}

// Release ends id's claim on ref: persistent members stop, ephemeral ones are
// recreated, then the Lease is deleted. An admin releasing another user's
// desktop is a force-release, audit-logged with reason. Open consoles are
// closed with a message first. A failed power step keeps the claim.
func (s *Service) Release(ctx context.Context, id Identity, ref Ref, reason string) error {
	if _, err := s.backend.Member(ctx, ref); err != nil {
		return err
	}
	l, err := s.authorize(ctx, id, ref)
	if err != nil {
		return err
	}
	if l == nil {
		return Errorf(EConflict, "Nothing to release.", "Desktop %s is not claimed.", ref)
	}
	action, text := "release", "The desktop was released."
	if l.Holder != id.Login {
		action, text = "force-release", "An admin ("+id.Login+") released this desktop."
		if reason != "" {
			text += " Reason: " + reason
		}
	}
	if err := s.reclaim(ctx, l, action, text); err != nil {
		return err
	}
	detail := "holder " + l.Holder
	if reason != "" {
		detail += "; reason: " + reason
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: action, Namespace: ref.Namespace, Target: ref.Name, Detail: detail})
	s.log.Info(action, "desktop", ref, "holder", l.Holder, "by", id.Login)
	return nil
}

// reclaim takes the member of l back: it marks the Lease with rule (a
// compare-and-swap, so console updates stop and a claim renewed meanwhile
// is not taken), closes the member's consoles with text, resets the member
// as its pool's mode says, and deletes the Lease. A crash at any step
// leaves a marked Lease that the reclaim loop finishes.
func (s *Service) reclaim(ctx context.Context, l *Lease, rule, text string) error {
	if l.Annotations[AnnotationReclaiming] == "" {
		marked := *l
		marked.Annotations = maps.Clone(l.Annotations)
		if marked.Annotations == nil {
			marked.Annotations = map[string]string{}
		}
		marked.Annotations[AnnotationReclaiming] = rule
		var err error
		if l, err = s.leases.Update(ctx, &marked); err != nil {
			if errors.Is(err, ErrConflict) {
				return Errorf(EConflict, "Look at the desktop again and retry.", "Desktop %s changed while it was being released.", marked.Ref())
			}
			return unavailable(err)
		}
	}
	s.closeConsoles(l.Ref(), errors.New(text))
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	if err != nil {
		return err
	}
	if p.Mode == ModeEphemeral {
		err = s.backend.Recreate(ctx, l.Ref())
	} else {
		err = s.backend.Stop(ctx, l.Ref())
	}
	if err != nil {
		return &Error{Code: EUnavailable, Err: err,
			Msg:  "Desktop " + l.Ref().String() + " could not be stopped; it is still claimed.",
			Hint: "Try releasing it again; if that fails, ask an admin."}
	}
	if err := s.leases.Delete(ctx, l); err != nil && !errors.Is(err, ErrNotFound) {
		return unavailable(err)
	}
	return nil
}

// Start powers on a member id holds (or any, for an admin).
func (s *Service) Start(ctx context.Context, id Identity, ref Ref) error {
	if _, err := s.Desktop(ctx, id, ref); err != nil {
		return err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "start", Namespace: ref.Namespace, Target: ref.Name})
	return s.backend.Start(ctx, ref)
}

// Stop powers off a member id holds (or any, for an admin); the claim stays.
func (s *Service) Stop(ctx context.Context, id Identity, ref Ref) error {
	if _, err := s.Desktop(ctx, id, ref); err != nil {
		return err
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

func (s *Service) claimLock(key string) *sync.Mutex {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	mu := s.claimBy[key]
	if mu == nil {
		mu = &sync.Mutex{}
		s.claimBy[key] = mu
	}
	return mu
}

// record writes an audit event; a failure is logged, never fatal.
func (s *Service) record(ctx context.Context, e AuditEvent) {
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.Error("audit", "action", e.Action, "err", err)
	}
}

func unavailable(err error) error {
	return &Error{Code: EUnavailable, Err: err, Msg: "The claim store did not answer.", Hint: "Try again in a moment; an admin should check the portal's logs."}
}
