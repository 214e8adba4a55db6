package kube

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Other replicas' heartbeats are judged as client-go's leader election
// judges a lock: by when this replica saw one change (a new
// resourceVersion), on this replica's own monotonic clock, and the
// duration it states; never by the renewTime another replica wrote. So
// a replica whose clock runs minutes ahead neither takes a live
// replica's screens nor, minutes behind, keeps a dead one's: their
// clocks need not agree. A heartbeat first seen counts as renewed then
// (a replica that just started waits one heartbeat's life for a dead
// one, as a new leader-election candidate does). Each replica lists the
// heartbeats every second (Run), and every read of one is a sighting
// too, so a renewal is seen within about a second.

// sighting is when this replica first saw a heartbeat's version.
type sighting struct {
	version string
	at      time.Time // on this replica's clock (monotonic)
}

// sightings keeps the heartbeats this replica has seen, by Lease name.
type sightings struct {
	now func() time.Time

	mu   sync.Mutex
	seen map[string]sighting
}

// alive records heartbeat l as seen now and reports whether it was
// renewed (its version changed) within its duration of this replica's
// clock.
func (s *sightings) alive(l *coordinationv1.Lease) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]sighting{}
	}
	seen, ok := s.seen[l.Name]
	if !ok || seen.version != l.ResourceVersion {
		seen = sighting{version: l.ResourceVersion, at: now}
		s.seen[l.Name] = seen
	}
	if l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Sub(seen.at) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}

// quiet reports how long ago, on this replica's clock, heartbeat name
// was last seen to change (zero for one not seen).
func (s *sightings) quiet(name string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, ok := s.seen[name]
	if !ok {
		return 0
	}
	return s.now().Sub(seen.at)
}

// keep forgets the heartbeats other than those listed: deleted, their
// replicas stopped.
func (s *sightings) keep(listed []coordinationv1.Lease) {
	there := make(map[string]bool, len(listed))
	for _, l := range listed {
		there[l.Name] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.seen {
		if !there[name] {
			delete(s.seen, name)
		}
	}
}

// gone forgets heartbeat name: deleted, its replica stopped.
func (s *sightings) gone(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, name)
}

// look lists the heartbeats in the portal's namespace, sights each
// (forgetting those gone: their replicas stopped) and returns the live
// ones.
func (o *ScreenOwners) look(ctx context.Context) ([]coordinationv1.Lease, error) {
	list, err := o.cs.CoordinationV1().Leases(o.ns).List(ctx, metav1.ListOptions{LabelSelector: labelScreenLease + "=replica"})
	if err != nil {
		return nil, err
	}
	o.seen.keep(list.Items)
	var live []coordinationv1.Lease
	var names []string
	for _, l := range list.Items {
		if o.seen.alive(&l) {
			live = append(live, l)
			if l.Annotations[annoDraining] != "true" {
				names = append(names, ptrString(l.Spec.HolderIdentity))
			}
		}
	}
	o.liveMu.Lock()
	o.live, o.liveAt = names, o.now()
	o.liveMu.Unlock()
	return live, nil
}

var _ vdi.Replicas = (*ScreenOwners)(nil)

// Live implements vdi.Replicas: the replicas whose heartbeats ran and
// were not draining at the last look (Run looks every second), so that
// each replica's claims try their own share of a pool's members first.
// A look older than peersFresh (Run stopped, or the API server has not
// answered since) gives none: the replicas may have changed since.
func (o *ScreenOwners) Live() (self string, live []string) {
	o.liveMu.Lock()
	defer o.liveMu.Unlock()
	if o.liveAt.IsZero() || o.now().Sub(o.liveAt) >= peersFresh {
		return o.self, nil
	}
	if o.draining.Load() {
		return o.self, slices.DeleteFunc(slices.Clone(o.live), func(r string) bool { return r == o.self })
	}
	return o.self, o.live
}

// probeAfter is how long a heartbeat goes unrenewed before its replica's
// port is tried (portClosed): two of its renewals missed.
const probeAfter = 2 * heartbeatEvery

// portClosed reports whether the replica of heartbeat l refuses a
// connection on the port of its peer URL. A replica killed outright
// (SIGKILL, out of memory, a crash) leaves its port closed, which a dial
// tells at once, where its heartbeat takes its whole life to run out. A
// refusal alone proves it dead: a timeout (a node lost, a network cut),
// a name that does not resolve or any answer proves nothing, and the
// heartbeat decides. A replica that started again on the same address
// answers (as another replica), so it proves nothing either.
func portClosed(ctx context.Context, l *coordinationv1.Lease) bool {
	u, err := url.Parse(l.Annotations[annoPeerURL])
	if err != nil || u.Hostname() == "" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
