package kube

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AnnotationInvalid is set on a vdi.Lease read from a Lease that someone
// edited into nonsense; its value says what is wrong. It is never written.
const AnnotationInvalid = "corral.dev/vdi-invalid"

// LeasesConfig configures Leases.
type LeasesConfig struct {
	// Client talks to the apiserver; required.
	Client kubernetes.Interface
	// Namespace limits the cache to one namespace; empty watches all.
	Namespace string
	// Log gets reports of malformed Leases; slog.Default when nil.
	Log *slog.Logger
}

// Leases keeps claims in coordination.k8s.io/v1 Leases named
// vdi.LeasePrefix+member in the member's namespace. Writes go to the
// apiserver, whose resourceVersion checks make them compare-and-swap; Get
// reads the apiserver; List reads a watch-fed cache (after Start), so that
// choosing a free member does not list the world on every click.
type Leases struct {
	client    kubernetes.Interface
	namespace string
	log       *slog.Logger

	informer cache.SharedIndexInformer
	lister   coordinationlisters.LeaseLister

	mu       sync.Mutex
	own      map[leaseKey]own  // this instance's latest write of a Lease, until the cache catches up
	reported map[string]string // namespace/name -> resourceVersion already reported as malformed

	shared shared // List's conversions (leases_shared.go)

	seen seen // the newest write the cache shows (read_after.go)

	unlabelled workqueue.TypedInterface[string] // Leases to give their holder's label (leases_label.go)
}

// own is a write this instance made that the cache may not show yet: the
// Lease as written, or nil for a delete of the Lease at resourceVersion rv.
type own struct {
	rv    string
	lease *coordinationv1.Lease
}

// shownBy reports whether the cache's copy at resourceVersion cached is at
// least as new as this write.
func (w own) shownBy(cached string) bool {
	if w.lease == nil {
		return newer(cached, w.rv)
	}
	return !newer(w.rv, cached)
}

var _ vdi.Leases = (*Leases)(nil)

const poolIndex = "pool"

// NewLeases returns Leases; call Start to fill the cache List reads.
func NewLeases(cfg LeasesConfig) *Leases {
	l := &Leases{client: cfg.Client, namespace: cfg.Namespace, log: cfg.Log, own: map[leaseKey]own{}, reported: map[string]string{}}
	if l.log == nil {
		l.log = slog.Default()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = vdi.LabelMember }))
	inf := factory.Coordination().V1().Leases()
	l.informer, l.lister = inf.Informer(), inf.Lister()
	if err := l.informer.AddIndexers(cache.Indexers{poolIndex: func(obj any) ([]string, error) {
		o := obj.(*coordinationv1.Lease)
		return []string{o.Namespace + "/" + o.Labels[vdi.LabelPool]}, nil
	}}); err != nil {
		panic(err) // only fails after the informer started
	}
	l.seen.follow(l.informer)
	l.shared.forget(l.informer)
	l.labelHolders()
	return l
}

// Start fills the cache and keeps it current until ctx ends. It fails early
// when the portal may not list Leases (the RBAC it needs is in deploy/).
func (l *Leases) Start(ctx context.Context) error {
	_, err := l.client.CoordinationV1().Leases(l.namespace).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelMember, Limit: 1})
	if err != nil {
		where := "namespace " + l.namespace
		if l.namespace == "" {
			where = "all namespaces"
		}
		return fmt.Errorf("kube: list leases in %s (the portal's RBAC is in deploy/rbac.yaml): %w", where, err)
	}
	go l.informer.Run(ctx.Done())
	go l.labelQueued(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), l.informer.HasSynced) {
		return fmt.Errorf("kube: lease cache did not fill: %w", context.Cause(ctx))
	}
	return nil
}

// OnAcquire calls f whenever a Lease is created (a claim on any replica):
// the replica that keeps the warm standby refills at once, not at its
// next tick.
func (l *Leases) OnAcquire(f func()) {
	if _, err := l.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { f() }}); err != nil {
		panic(err) // only fails once the informer stopped
	}
}

// OnChange calls f with the member of every claim Lease created,
// updated or deleted, on any replica: an invitee's console elsewhere
// checks its invitation at once (vdi.ChangeNotifier).
func (l *Leases) OnChange(f func(vdi.Ref)) {
	on := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*coordinationv1.Lease); ok && strings.HasPrefix(o.Name, vdi.LeasePrefix) {
			f(vdi.Ref{Namespace: o.Namespace, Name: strings.TrimPrefix(o.Name, vdi.LeasePrefix)})
		}
	}
	if _, err := l.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, o any) { on(o) },
		DeleteFunc: on,
	}); err != nil {
		panic(err) // only fails once the informer stopped
	}
}

// Get returns the member's Lease as the apiserver has it now.
func (l *Leases) Get(ctx context.Context, ref vdi.Ref) (*vdi.Lease, error) {
	o, err := l.client.CoordinationV1().Leases(ref.Namespace).Get(ctx, vdi.LeasePrefix+ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kube: get lease %s: %w", ref, vdi.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("kube: get lease %s: %w", ref, err)
	}
	return l.fromKube(o), nil
}

// List returns the Leases in namespace (all when empty), of pool when pool
// is not empty, from the cache plus this instance's own newer writes;
// before Start, from the apiserver. When the cache does not show yet the
// write ctx must read after (vdi.ReadAfter), or that write's answer was
// lost (vdi.UnknownVersion), the Leases of the holder it names are read
// past the cache, from the apiserver. The Leases are
// shared with other callers (leases_shared.go): read-only.
func (l *Leases) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	var objs []*coordinationv1.Lease
	var err error
	rv, holder := vdi.ReadAfter(ctx)
	switch {
	case !l.informer.HasSynced():
		objs, err = l.readPast(ctx, namespace, pool, "")
	case rv == vdi.UnknownVersion || !l.seen.reached(ctx, rv):
		var hers []*coordinationv1.Lease
		if objs, err = l.cached(namespace, pool); err == nil {
			if hers, err = l.readPast(ctx, namespace, pool, holder); err == nil {
				objs = withFresh(objs, hers)
			}
		}
	default:
		objs, err = l.cached(namespace, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("kube: list leases in %q: %w", namespace, err)
	}
	return l.shared.leases(objs, l.fromKube), nil
}

// cached merges the cache with own writes it does not show yet.
func (l *Leases) cached(namespace, pool string) ([]*coordinationv1.Lease, error) {
	var objs []*coordinationv1.Lease
	switch {
	case pool != "" && namespace != "":
		items, err := l.informer.GetIndexer().ByIndex(poolIndex, namespace+"/"+pool)
		if err != nil {
			return nil, err
		}
		objs = make([]*coordinationv1.Lease, len(items))
		for i, it := range items {
			objs[i] = it.(*coordinationv1.Lease)
		}
	default:
		sel := labels.Everything()
		if pool != "" {
			sel = labels.SelectorFromSet(labels.Set{vdi.LabelPool: pool})
		}
		var err error
		if namespace == "" {
			objs, err = l.lister.List(sel)
		} else {
			objs, err = l.lister.Leases(namespace).List(sel)
		}
		if err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.own) == 0 {
		return objs, nil
	}
	seen := map[leaseKey]bool{}
	out := make([]*coordinationv1.Lease, 0, len(objs)+len(l.own))
	for _, o := range objs {
		key := keyOf(o)
		w, ok := l.own[key]
		if ok {
			seen[key] = true
		}
		switch {
		case !ok:
			out = append(out, o)
		case w.shownBy(o.ResourceVersion):
			delete(l.own, key) // the cache caught up
			out = append(out, o)
		case w.lease != nil:
			out = append(out, w.lease)
		}
	}
	for key, w := range l.own {
		if seen[key] {
			continue
		}
		if w.lease == nil {
			delete(l.own, key) // the cache no longer shows the deleted Lease
			continue
		}
		if (namespace == "" || w.lease.Namespace == namespace) && (pool == "" || w.lease.Labels[vdi.LabelPool] == pool) {
			out = append(out, w.lease)
		}
	}
	return out, nil
}

// remember records a write of this instance until the cache shows it.
func (l *Leases) remember(namespace, name, rv string, o *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := leaseKey{namespace, name}
	if w, ok := l.own[key]; ok && newer(w.rv, rv) {
		return
	}
	l.own[key] = own{rv: rv, lease: o}
	if len(l.own) > 4096 { // a cache that stopped: do not grow without end
		clear(l.own)
	}
}

// newer reports whether resourceVersion a is after b, compared as
// Kubernetes defines them (k8s.io/apimachinery/pkg/util/resourceversion):
// a well-formed a is newer than a b that is not (empty: none yet), and a
// malformed a is never newer.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err == nil {
		return c > 0
	}
	_, errA := resourceversion.CompareResourceVersion(a, a)
	return errA == nil
}

// Create makes the member's Lease; vdi.ErrAlreadyExists when it has one.
func (l *Leases) Create(ctx context.Context, in *vdi.Lease) (*vdi.Lease, error) {
	o := toKube(in)
	o.ResourceVersion = ""
	got, err := l.client.CoordinationV1().Leases(in.Namespace).Create(ctx, o, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kube: create lease %s: %w: %w", in.Ref(), vdi.ErrAlreadyExists, err)
	} else if err != nil {
		return nil, fmt.Errorf("kube: create lease %s: %w", in.Ref(), err)
	}
	l.remember(got.Namespace, got.Name, got.ResourceVersion, got)
	return l.fromKube(got), nil
}

// Delete removes the member's Lease if in.ResourceVersion is current;
// vdi.ErrConflict when it is stale or empty, vdi.ErrNotFound when it is gone.
func (l *Leases) Delete(ctx context.Context, in *vdi.Lease) error {
	if in.ResourceVersion == "" {
		return fmt.Errorf("kube: delete lease %s without a resource version: %w", in.Ref(), vdi.ErrConflict)
	}
	rv := in.ResourceVersion
	err := l.client.CoordinationV1().Leases(in.Namespace).Delete(ctx, vdi.LeasePrefix+in.Member,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: delete lease %s: %w: %w", in.Ref(), vdi.ErrNotFound, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: delete lease %s: %w: %w", in.Ref(), vdi.ErrConflict, err)
	case err != nil:
		return fmt.Errorf("kube: delete lease %s: %w", in.Ref(), err)
	}
	// Hide the deleted Lease until the cache shows it gone or rewritten.
	l.remember(in.Namespace, vdi.LeasePrefix+in.Member, rv, nil)
	return nil
}

// toKube returns the Lease object for l.
func toKube(l *vdi.Lease) *coordinationv1.Lease {
	holder := l.Holder
	secs := int32(l.Duration / time.Second)
	ann := maps.Clone(l.Annotations)
	delete(ann, AnnotationInvalid)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: l.Namespace, Name: vdi.LeasePrefix + l.Member, ResourceVersion: l.ResourceVersion,
			Labels:      map[string]string{vdi.LabelPool: l.Pool, vdi.LabelMember: l.Member, vdi.LabelHolder: vdi.HolderLabel(l.Holder)},
			Annotations: ann,
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &secs,
			AcquireTime:          microTime(l.AcquireTime),
			RenewTime:            microTime(l.RenewTime),
		},
	}
}

func microTime(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewMicroTime(t)
	return &m
}
