package vdi

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Claims by shard (docs/decisions/kube-one-write.md, "The replicas'
// route, checked"): users hash to a few shards, and each shard is a Lease
// (shardPrefix+k, in the lock namespace) that one replica holds as
// client-go's leader election holds its lock. The holder runs its
// shards' users' claims, one at a time per user (lockTurns), each with
// one write, the member's Lease; every other replica forwards them to
// it (ShardConfig.Forward). So a user's rules (one desktop per pool, the
// quotas) are read and written by one process at a time, in memory,
// without her claim lock.
//
// A hold ends on the holder's clock shardGuard before shardDuration from
// when the write that last renewed it was sent: a claim under it ends its
// store requests then (as a claim under a claim lock does). Another
// replica takes a shard over only after seeing its Lease unchanged for
// shardDuration on its own clock, by an update carrying the
// resourceVersion it saw (the takeover write): the clocks need not agree,
// only run at about one speed. The old holder stopped writing before the
// takeover write, so every write of its claims has a lower
// resourceVersion, and the new holder's claims read a user's Leases after
// it (WithReadAfter): the fence. A user's next claim on the same holder
// reads after her last write there (past the cache, where that write's
// answer was lost: UnknownVersion). Where the store reports its Leases'
// changes (ChangeNotifier, the kube backend's watch), a shard let go is
// taken by the replica that should hold it, and a claim waiting for a
// holder goes on, at the change (changed, route): a handover takes a
// watch event, not a pass.
const (
	// ShardPool is the pool label of the shards' Leases.
	ShardPool     = "claim.shard"
	shardPrefix   = "claimshard-"
	shardDuration = 15 * time.Second
	shardGuard    = 3 * time.Second
	// shardUnwanted is how long a replica that should not hold a shard
	// sees its Lease (or its absence) unchanged before it takes it: a
	// whole duration after the replica that should hold it would, so
	// that one takes it first wherever it runs claims by shard, though
	// it saw the Lease go quiet later (it started later, or the holder
	// that gave the shard up saw its own last renewal first, its
	// delete refused).
	shardUnwanted = 2 * shardDuration
	shardRenew    = 2 * time.Second
	// shardLeft is the least time a hold must have left for a claim to
	// start under it; one with less waits for the renewal (or the
	// takeover).
	shardLeft = 4 * time.Second
	// DefaultShardCount is how many shards users hash to.
	DefaultShardCount = 16
	// AnnotationShardURL is on a shard's Lease where its holder is reached.
	AnnotationShardURL = "corral.dev/vdi-shard-url"
)

// Forwarder sends a claim to the replica that holds its user's shard.
type Forwarder interface {
	// ForwardTake sends req to the replica reached at url, signed as a
	// peer's request, and returns its answer; an error from the holder
	// comes back as the *Error it was.
	ForwardTake(ctx context.Context, url string, req TakeRequest) (TakeAnswer, error)
}

// ShardConfig turns on claims by shard (see NewService): every replica
// of the portal must have it, or none.
type ShardConfig struct {
	// URL returns where the other replicas reach this one.
	URL func() string
	// Forward sends claims to other replicas.
	Forward Forwarder
	// Count is how many shards users hash to (DefaultShardCount).
	Count int
	// Clock times the holds, their renewals and a claim's waits for a
	// shard's holder; the real clock when nil (tests hold one still to
	// show what wakes a wait).
	Clock clock.WithTicker
}

// shards keeps this replica's holds of the claim shards.
type shards struct {
	s       *Service
	ns      string
	count   int
	url     func() string
	forward Forwarder
	clock   clock.WithTicker
	kick    chan struct{}
	takeNow chan int // shards this replica should hold whose Lease changed (changed)

	going sync.WaitGroup // holds being let go (letGo)

	mu     sync.Mutex
	failed error // the last refusal of a shard's read or write, nil once one succeeds
	held   map[int]*shardHold
	seen   map[int]shardSighting // shards not held here
}

// shardHold is this replica's hold of one shard.
type shardHold struct {
	lease   *Lease    // as last written
	renewed time.Time // when the write of lease was sent
	until   time.Time // on this replica's clock: no store request after it
	fence   string    // the takeover write's resourceVersion
	// last maps a login to her last write here, which her next claim
	// reads after.
	last map[string]string
	// unwanted is the view (shards.view) under which this replica took
	// the shard though another should hold it, because none did for
	// shardUnwanted (a replica of an earlier release, without claims
	// by shard, during a rolling update): it keeps it while the view
	// stays, where giving it up would leave it free again.
	unwanted string
	active   int           // claims running under the hold
	leaving  bool          // given up: no claim starts under it
	idle     chan struct{} // closed when the last claim ends, once given up
}

// shardSighting is when this replica first saw a shard's Lease version
// ("" for none), on its monotonic clock.
type shardSighting struct {
	version string
	at      time.Time
}

func newShards(s *Service, ns string, cfg *ShardConfig) *shards {
	n := cfg.Count
	if n <= 0 {
		n = DefaultShardCount
	}
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &shards{s: s, ns: ns, count: n, url: cfg.URL, forward: cfg.Forward, clock: c, kick: make(chan struct{}, 1),
		takeNow: make(chan int, n), held: map[int]*shardHold{}, seen: map[int]shardSighting{}}
}

// shardOf returns the shard of login.
func (sh *shards) shardOf(login string) int { return ShardOf(login, sh.count) }

// ShardOf returns which of count claim shards login's claims run under.
func ShardOf(login string, count int) int {
	h := fnv.New32a()
	h.Write([]byte(login))
	return int(h.Sum32() % uint32(count))
}

func (sh *shards) ref(k int) Ref {
	return Ref{Namespace: sh.ns, Name: shardPrefix + strconv.Itoa(k)}
}

// self returns this replica's name.
func (sh *shards) self() string {
	if sh.s.spread.replicas == nil {
		return instanceID
	}
	self, _ := sh.s.spread.replicas.Live()
	return self
}

// wants reports whether this replica should hold shard k: the one that
// rendezvous hashing of the shard over the live replicas gives (all when
// none are known).
func (sh *shards) wants(k int) bool {
	if sh.s.spread.replicas == nil {
		return true
	}
	self, live := sh.s.spread.replicas.Live()
	if len(live) == 0 {
		return true
	}
	best, top := "", uint64(0)
	for _, r := range live {
		h := fnv.New64a()
		h.Write([]byte(strconv.Itoa(k) + "\x00" + r))
		if v := h.Sum64(); best == "" || v > top {
			best, top = r, v
		}
	}
	return best == self
}

// view names the live replicas as this one sees them now.
func (sh *shards) view() string {
	if sh.s.spread.replicas == nil {
		return ""
	}
	_, live := sh.s.spread.replicas.Live()
	live = slices.Clone(live)
	slices.Sort(live)
	return strings.Join(live, "\x00")
}

// run keeps this replica's holds until ctx ends, then gives them up.
func (sh *shards) run(ctx context.Context) {
	if n, ok := sh.s.leases.(ChangeNotifier); ok {
		n.OnChange(sh.changed)
	}
	t := sh.clock.NewTicker(shardRenew)
	defer t.Stop()
	for {
		sh.pass(ctx)
		if !sh.await(ctx, t.C()) {
			sh.giveUpAll()
			return
		}
	}
}

// await waits for run's next pass (tick, or a wake), taking meanwhile the
// shards whose Lease changed that this replica should hold (changed);
// false once ctx ended.
func (sh *shards) await(ctx context.Context, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-sh.kick:
			return true
		case k := <-sh.takeNow:
			sh.mu.Lock()
			h := sh.held[k]
			sh.mu.Unlock()
			if h == nil {
				sh.take(ctx, k)
			}
		}
	}
}

// changed is told of every change of a claim's Lease the store reports
// (ChangeNotifier): when it is the Lease of a shard this replica should
// hold and does not (its holder let it go, took it or renewed it), run
// looks at that shard at once, so a shard handed over waits for a watch
// event, not for the next pass (up to shardRenew, which claims waited
// out: the soak's lone warm claims of 550-830 ms as the replicas
// joined).
func (sh *shards) changed(ref Ref) {
	name, ok := strings.CutPrefix(ref.Name, shardPrefix)
	if !ok || ref.Namespace != sh.ns {
		return
	}
	k, err := strconv.Atoi(name)
	if err != nil || k < 0 || k >= sh.count || sh.holds(k) || !sh.wants(k) {
		return
	}
	select {
	case sh.takeNow <- k:
	default: // run has it queued already, or its pass will
	}
}

// wake asks run for a pass now (a claim found no holder).
func (sh *shards) wake() {
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// pass renews the holds, gives up those another replica should hold and
// takes those this one should that are free or run out.
func (sh *shards) pass(ctx context.Context) {
	for k := 0; k < sh.count; k++ {
		if ctx.Err() != nil {
			return // the portal stops: run gives every hold up
		}
		sh.mu.Lock()
		h := sh.held[k]
		sh.mu.Unlock()
		switch {
		case h != nil && h.leaving: // being let go (letGo)
		case h != nil && !sh.wants(k) && (h.unwanted == "" || h.unwanted != sh.view()):
			sh.letGo(k, h, sh.sayLetGo)
		case h != nil && sh.clock.Since(h.renewed) >= shardRenew*3/4: // a pass woken early renews nothing
			sh.renew(ctx, k, h)
		case h != nil:
		default:
			sh.take(ctx, k)
		}
	}
}

// renew writes hold h of shard k again; a hold whose Lease changed under
// it is lost at once, one whose renewal fails runs to its until. The
// portal's stop does not cut a renewal under way (see uncut).
func (sh *shards) renew(ctx context.Context, k int, h *shardHold) {
	sent := sh.clock.Now()
	want := sh.want(h.lease)
	rctx, cancel := context.WithTimeout(uncut(ctx), h.until.Sub(sent))
	l, err := sh.s.leases.Update(rctx, want)
	cancel()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case err == nil:
		h.lease, h.until, h.renewed = l, sent.Add(shardDuration-shardGuard), sent
		sh.failed = nil
	case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
		sh.s.log.Warn("claim shard lost: another replica took it", "shard", k)
		h.leaving = true
		delete(sh.held, k)
	default:
		sh.s.log.Warn("claim shard not renewed; its hold runs out unless a renewal gets through", "shard", k, "left", sh.left(h).Round(time.Millisecond), "err", err)
		sh.failed = err
		if sh.left(h) <= 0 {
			h.leaving = true
			delete(sh.held, k)
		}
	}
}

// want returns the Lease that holds a shard from now, over old (nil: a
// new Lease).
func (sh *shards) want(old *Lease) *Lease {
	now := sh.s.now()
	l := &Lease{Pool: ShardPool, Holder: sh.self(), AcquireTime: now, RenewTime: now, Duration: shardDuration,
		Annotations: map[string]string{AnnotationShardURL: sh.url()}}
	if old != nil {
		l.Namespace, l.Member, l.ResourceVersion, l.AcquireTime = old.Namespace, old.Member, old.ResourceVersion, old.AcquireTime
	}
	return l
}

// take takes shard k when its Lease is missing and this replica should
// hold it, or its Lease (or its absence) was seen unchanged for
// shardDuration on this replica's clock (shardUnwanted where another
// should hold it): its holder stopped, or the replica that should take
// it does not.
func (sh *shards) take(ctx context.Context, k int) {
	if ctx.Err() != nil {
		return // the portal stops (run's wait may pick a change over the stop)
	}
	ref := sh.ref(k)
	cur, err := sh.s.leases.Get(ctx, ref)
	if err != nil && !errors.Is(err, ErrNotFound) {
		sh.s.log.Debug("claim shard not read", "shard", k, "err", err)
		sh.fail(err)
		return
	}
	rv := ""
	if cur != nil {
		rv = cur.ResourceVersion
	}
	// Whether this replica should hold the shard is judged once, before
	// the write: a hold taken because it should is let go like any
	// other once the live replicas change, even while its write is on
	// its way; only one taken because it should not (no other did for
	// shardUnwanted) is kept while the view it was judged by stays.
	view, wanted := sh.view(), sh.wants(k)
	wait := shardDuration
	if !wanted {
		wait = shardUnwanted
	}
	run := sh.quiet(k, rv) >= wait
	if !run && (cur != nil || !wanted) {
		return
	}
	want := sh.want(cur)
	want.Namespace, want.Member = ref.Namespace, ref.Name
	want.AcquireTime = sh.s.now()
	sent := sh.clock.Now()
	wctx, cancel := context.WithTimeout(uncut(ctx), shardDuration-shardGuard)
	defer cancel()
	var l *Lease
	if cur == nil {
		l, err = sh.s.leases.Create(wctx, want)
	} else {
		l, err = sh.s.leases.Update(wctx, want)
	}
	if err != nil {
		sh.s.log.Debug("claim shard not taken", "shard", k, "err", err)
		if !errors.Is(err, ErrAlreadyExists) && !errors.Is(err, ErrConflict) {
			sh.fail(err)
		}
		return
	}
	sh.mu.Lock()
	sh.failed = nil
	h := &shardHold{lease: l, until: sent.Add(shardDuration - shardGuard), renewed: sent, fence: l.ResourceVersion, last: map[string]string{}}
	if !wanted {
		h.unwanted = view
	}
	sh.held[k] = h
	delete(sh.seen, k)
	sh.mu.Unlock()
	prev := "none"
	if cur != nil {
		prev = cur.Holder
	}
	sh.s.log.Info("claim shard taken", "shard", k, "from", prev)
}

// uncut returns ctx without the portal's stop, for a write of a hold: cut
// under way, the write may still be made while its writer does not learn
// its resourceVersion, so that the delete that gives the hold up is
// refused and the shard waits out its duration for the next holder.
func uncut(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// fail notes err, a refusal of a shard's read or write.
func (sh *shards) fail(err error) {
	sh.mu.Lock()
	sh.failed = err
	sh.mu.Unlock()
}

// failing returns the store's last refusal of a shard's read or write,
// nil when the last one succeeded.
func (sh *shards) failing() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.failed
}

// quiet records shard k's Lease version rv as seen now and returns how
// long ago this replica first saw it.
func (sh *shards) quiet(k int, rv string) time.Duration {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	seen, ok := sh.seen[k]
	if !ok || seen.version != rv {
		seen = shardSighting{version: rv, at: sh.clock.Now()}
		sh.seen[k] = seen
	}
	return sh.clock.Since(seen.at)
}

// RunShards keeps this replica's holds of the claim shards until ctx
// ends, then gives them up (their users' next claims wait for the
// replica that takes them); it returns at once without claims by shard.
func (s *Service) RunShards(ctx context.Context) {
	if s.shards == nil {
		return
	}
	s.log.Info("claims by shard: a user's claims run on the replica that holds her shard", "namespace", s.shards.ns, "shards", s.shards.count)
	s.shards.run(ctx)
}
