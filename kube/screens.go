package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/console"
)

// Screen owners on Kubernetes (see console.Owners): in the portal's own
// namespace, each replica keeps a heartbeat Lease
// corral-vdi-replica.<identity> renewed every second, with its peer URL;
// a desktop's screen has a Lease corral-vdi-screen.<ns>.<member> naming
// its owner, written when the owner changes (create, or update on the
// observed resourceVersion: compare-and-swap) and deleted when the owner
// gives it up. An owner whose heartbeat ran out (a replica killed, its
// node lost) may be replaced. A heartbeat runs out when this replica has
// not seen it change for its duration (sightings): the replicas' clocks
// need not agree.

// Labels and annotations of the screen Leases.
const (
	labelScreenLease = "corral.dev/vdi-screen"     // "owner" or "replica"
	annoPeerURL      = "corral.dev/vdi-peer-url"   // where other replicas reach the replica
	annoScreenOf     = "corral.dev/vdi-screen-of"  // the desktop, ns/member
	annoDraining     = "corral.dev/vdi-draining"   // "true" while the replica drains
	peersFresh       = 5 * time.Second             // how long a list of peers is used
	defaultHeartbeat = 5 * time.Second             // a replica's heartbeat lives this long
	heartbeatEvery   = time.Second                 // and is renewed this often
	screenLeasePfx   = "corral-vdi-screen."        // + ns.member
	replicaLeasePfx  = "corral-vdi-replica."       // + identity
	maxLeaseName     = 253                         // a DNS subdomain
	leaseFieldOwner  = "corral-vdi-portal-screens" // field manager
)

// ScreenOwnersConfig configures ScreenOwners.
type ScreenOwnersConfig struct {
	Client kubernetes.Interface
	// Namespace is the portal's own.
	Namespace string
	// Identity names this replica (the reclaim election's identity).
	Identity string
	// URL is where other replicas reach this one (its peer links' base);
	// see SetURL.
	URL string
	// Heartbeat is how long this replica's heartbeat lives unrenewed;
	// zero means 5s.
	Heartbeat time.Duration
	// Now is this replica's clock; nil means time.Now. Other replicas'
	// heartbeats are judged by how long ago on it they were seen to
	// change, so a Now that keeps time.Now's monotonic reading (e.g.
	// time.Now().Add(offset)) gives the same verdicts whatever its offset.
	Now func() time.Time
	Log *slog.Logger
}

// ScreenOwners keeps desktops' screen owners in Leases; it satisfies
// console.Owners. Run keeps this replica's heartbeat.
type ScreenOwners struct {
	cs        kubernetes.Interface
	ns        string
	self, url string
	heartbeat time.Duration
	now       func() time.Time
	log       *slog.Logger
	draining  atomic.Bool

	lapsed chan struct{} // a renewal after the heartbeat had run out
	seen   sightings     // the other replicas' heartbeats

	mu      sync.Mutex
	peers   []string  // the other replicas' URLs, found at
	peersAt time.Time // (zero: never)

	liveMu sync.Mutex
	live   []string  // the live replicas not draining, seen at
	liveAt time.Time // (zero: never)
}

var _ console.Owners = (*ScreenOwners)(nil)

// NewScreenOwners returns ScreenOwners for cfg.
func NewScreenOwners(cfg ScreenOwnersConfig) *ScreenOwners {
	o := &ScreenOwners{cs: cfg.Client, ns: cfg.Namespace, self: cfg.Identity, url: cfg.URL, heartbeat: cfg.Heartbeat, now: cfg.Now, log: cfg.Log,
		lapsed: make(chan struct{}, 1)}
	if o.heartbeat <= 0 {
		o.heartbeat = defaultHeartbeat
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.seen.now = o.now
	if o.log == nil {
		o.log = slog.Default()
	}
	return o
}

// SetURL sets where other replicas reach this one; call it before Run
// and before the first Take.
func (o *ScreenOwners) SetURL(url string) { o.url = url }

// URL returns where other replicas reach this one (SetURL).
func (o *ScreenOwners) URL() string { return o.url }

// Self implements console.Owners.
func (o *ScreenOwners) Self() string { return o.self }

// leaseName makes a Lease name of prefix and s: lower case, what a name
// may not hold turned into '-', hashed where too long.
func leaseName(prefix, s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
	if len(prefix)+len(s) <= maxLeaseName {
		return prefix + s
	}
	sum := sha256.Sum256([]byte(s))
	return prefix + hex.EncodeToString(sum[:20])
}

// screenLease names the Lease of key: "ns/member" (a screen:
// corral-vdi-screen.ns.member) or "kind:ns/member" (a shared console:
// corral-vdi-kind.ns.member).
func screenLease(key string) string {
	prefix := screenLeasePfx
	if kind, ref, ok := strings.Cut(key, ":"); ok {
		prefix, key = "corral-vdi-"+kind+".", ref
	}
	return leaseName(prefix, strings.Replace(key, "/", ".", 1))
}

// Get implements console.Owners.
func (o *ScreenOwners) Get(ctx context.Context, key string) (console.Owner, error) {
	l, err := o.cs.CoordinationV1().Leases(o.ns).Get(ctx, screenLease(key), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return console.Owner{}, nil
	} else if err != nil {
		return console.Owner{}, fmt.Errorf("kube: read the screen owner of %s: %w", key, err)
	}
	own := console.Owner{Replica: ptrString(l.Spec.HolderIdentity), URL: l.Annotations[annoPeerURL], Version: l.ResourceVersion}
	if own.Alive, err = o.alive(ctx, own.Replica); err != nil {
		return console.Owner{}, err
	}
	return own, nil
}

// alive reports whether replica renews its heartbeat (this one always),
// as this replica has seen it change (sightings), and, once it has
// missed two renewals, whether its port still takes connections
// (portClosed).
func (o *ScreenOwners) alive(ctx context.Context, replica string) (bool, error) {
	if replica == o.self {
		return true, nil
	}
	name := leaseName(replicaLeasePfx, replica)
	l, err := o.cs.CoordinationV1().Leases(o.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		o.seen.gone(name)
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("kube: read the heartbeat of replica %s: %w", replica, err)
	}
	if !o.seen.alive(l) {
		return false, nil
	}
	if quiet := o.seen.quiet(name); quiet >= probeAfter && portClosed(ctx, l) {
		o.log.Info("screen owner's port refused a connection: taken as dead before its heartbeat ran out",
			"replica", replica, "url", l.Annotations[annoPeerURL], "unrenewed", quiet.Round(time.Millisecond))
		return false, nil
	}
	return true, nil
}

// Take implements console.Owners.
func (o *ScreenOwners) Take(ctx context.Context, key string, prev console.Owner) (console.Owner, error) {
	// No duration: the owner's heartbeat says whether it lives.
	now := metav1.NewMicroTime(o.now())
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: screenLease(key), Namespace: o.ns, ResourceVersion: prev.Version,
			Labels:      map[string]string{labelScreenLease: "owner"},
			Annotations: map[string]string{annoPeerURL: o.url, annoScreenOf: key}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &o.self, AcquireTime: &now},
	}
	leases := o.cs.CoordinationV1().Leases(o.ns)
	var err error
	if prev.Version == "" {
		l, err = leases.Create(ctx, l, metav1.CreateOptions{FieldManager: leaseFieldOwner})
	} else {
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: leaseFieldOwner})
	}
	switch {
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return console.Owner{}, console.ErrOwnerChanged
	case err != nil:
		return console.Owner{}, fmt.Errorf("kube: record this replica as the screen owner of %s: %w", key, err)
	}
	return console.Owner{Replica: o.self, URL: o.url, Version: l.ResourceVersion, Alive: true}, nil
}

// Release implements console.Owners.
func (o *ScreenOwners) Release(ctx context.Context, key string, own console.Owner) error {
	err := o.cs.CoordinationV1().Leases(o.ns).Delete(ctx, screenLease(key), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &own.Version}})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another replica's now
	}
	return fmt.Errorf("kube: give up the screen of %s: %w", key, err)
}

// SetDraining marks this replica's heartbeat draining from its next
// renewal: other replicas stop choosing it as a peer.
func (o *ScreenOwners) SetDraining() { o.draining.Store(true) }

// Peers returns the URLs of the other replicas whose heartbeats run and
// that are not draining: the peer portals, found rather than configured.
// A list is reused for a few seconds; an error is logged and no peers
// are returned.
func (o *ScreenOwners) Peers(ctx context.Context) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.peersAt.IsZero() && o.now().Sub(o.peersAt) < peersFresh {
		return o.peers
	}
	live, err := o.look(ctx)
	if err != nil {
		o.log.Warn("peer replicas not found", "namespace", o.ns, "err", err)
		return nil
	}
	o.peers, o.peersAt = nil, o.now()
	for _, l := range live {
		id, url := ptrString(l.Spec.HolderIdentity), l.Annotations[annoPeerURL]
		if id == o.self || url == "" || l.Annotations[annoDraining] == "true" {
			continue
		}
		o.peers = append(o.peers, url)
	}
	return o.peers
}

// Lapsed receives when this replica's heartbeat is renewed after it had
// run out: other replicas may have taken its screens meanwhile
// (console.Screens.Recheck).
func (o *ScreenOwners) Lapsed() <-chan struct{} { return o.lapsed }

// Run keeps this replica's heartbeat until ctx ends, then deletes it, so
// that the screens it owned are taken over at once. Meanwhile it watches
// the other replicas' heartbeats change, looking at them as often as it
// renews its own.
func (o *ScreenOwners) Run(ctx context.Context) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	var last *coordinationv1.Lease
	failing := false
	renewed := o.now()
	for {
		l, err := o.beat(ctx, last)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			o.log.Warn("screen heartbeat not renewed: other replicas take this one's screens over once it runs out", "replica", o.self, "err", err)
			failing = true
		case err == nil && failing:
			o.log.Info("screen heartbeat renewed again", "replica", o.self, "after", o.now().Sub(renewed).Round(time.Millisecond))
			failing = false
			if o.now().Sub(renewed) >= o.heartbeat {
				select {
				case o.lapsed <- struct{}{}:
				default:
				}
			}
		}
		if err == nil {
			renewed = o.now()
		}
		if _, err := o.look(ctx); err != nil && ctx.Err() == nil {
			o.log.Debug("other replicas' heartbeats not read; judged when next read", "err", err)
		}
		last = l
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := o.cs.CoordinationV1().Leases(o.ns).Delete(dctx, leaseName(replicaLeasePfx, o.self), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				o.log.Warn("screen heartbeat left to run out", "replica", o.self, "err", err)
			}
			return
		case <-t.C:
		}
	}
}

// beat writes the heartbeat once: an update of last, else a create (or,
// when one is there already, an update of what is there).
func (o *ScreenOwners) beat(ctx context.Context, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := o.cs.CoordinationV1().Leases(o.ns)
	now := metav1.NewMicroTime(o.now())
	secs := int32(o.heartbeat / time.Second)
	annos := map[string]string{annoPeerURL: o.url}
	if o.draining.Load() {
		annos[annoDraining] = "true"
	}
	if last != nil {
		l := last.DeepCopy()
		l.Spec.RenewTime = &now
		l.Annotations = annos
		if l, err := leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: leaseFieldOwner}); err == nil {
			return l, nil
		}
	}
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName(replicaLeasePfx, o.self), Namespace: o.ns,
			Labels: map[string]string{labelScreenLease: "replica"}, Annotations: annos},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &o.self, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	created, err := leases.Create(ctx, l, metav1.CreateOptions{FieldManager: leaseFieldOwner})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cur.Spec = l.Spec
	cur.Annotations, cur.Labels = l.Annotations, l.Labels
	return leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: leaseFieldOwner})
}

// ptrString is *p, or "" for nil.
func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
