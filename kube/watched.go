package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// watched is one kind of object the backend reads from a shared informer
// (one namespace, or all, label-selected so that memory stays bounded by
// the pools) once it is started. Before that, and while its list or watch
// fails, reads go to the API server instead: a cache that may be behind is
// never the only answer. The reflector under the informer retries with
// client-go's bounded backoff (800 ms doubling to 30 s) and relists after
// an API-server restart; what is broken meanwhile is health's to say.
type watched struct {
	what     string // "VirtualMachines labelled corral.dev/vdi-pool in namespace x", for messages
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	started bool
	changed chan struct{}       // closed (and replaced) on every event
	broken  error               // the last list or watch failure; nil once one succeeds
	since   time.Time           // when it broke
	absent  bool                // the last list found no such resource (KubeVirt is not installed)
	own     map[string]ownWrite // namespace/name -> this instance's write the cache has not shown yet
}

// ownWrite is a write of this instance: its resourceVersion, and when it
// stops mattering (the object may have left the label selection).
type ownWrite struct {
	rv    string
	until time.Time
}

// ownWriteFor bounds how long reads of a namespace bypass the cache after
// a write of this instance that the cache does not show.
const ownWriteFor = 30 * time.Second

// poolLabelIndex indexes cached objects by namespace/value of a label.
func poolLabelIndex(label string) cache.Indexers {
	return cache.Indexers{poolIndex: func(obj any) ([]string, error) {
		o, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		return []string{o.GetNamespace() + "/" + o.GetLabels()[label]}, nil
	}}
}

// newWatched returns the cache of what list and watch return, objects like
// example, indexed by namespace/value of label.
func newWatched(what string, example runtime.Object, label string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *watched {
	w := &watched{what: what, changed: make(chan struct{}), own: map[string]ownWrite{}}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := list(ctx, o)
			w.report(err)
			w.mu.Lock()
			w.absent = apierrors.IsNotFound(err)
			w.mu.Unlock()
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := watchFn(ctx, o)
			w.report(err)
			return wi, err
		},
	}
	w.informer = cache.NewSharedIndexInformer(lw, example, 0, poolLabelIndex(label))
	if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// A watch that ends (EOF) or whose resourceVersion is too old
		// (410 Gone) is routine: the reflector watches again or relists.
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			w.report(err)
		}
	}); err != nil {
		panic(err) // only fails after the informer started
	}
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.event,
		UpdateFunc: func(_, o any) { w.event(o) },
		DeleteFunc: w.event,
	}); err != nil {
		panic(err)
	}
	return w
}

// start runs the informer until ctx ends; reads use it once it is filled.
func (w *watched) start(ctx context.Context) {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	go w.informer.RunWithContext(ctx)
}

// waitFilled waits until the cache is filled, or says why it is not when
// ctx ends first.
func (w *watched) waitFilled(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !w.informer.HasSynced() && !w.missing() {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			err := w.broken
			w.mu.Unlock()
			if err == nil {
				err = context.Cause(ctx)
			}
			return fmt.Errorf("kube: the cache of %s did not fill (it keeps trying; reads go to the API server meanwhile): %w", w.what, err)
		case <-t.C:
		}
	}
	return nil
}

// missing reports whether the API server has no such resource, as its
// last list said: the informer lists again with backoff, and reads need
// not ask meanwhile.
func (w *watched) missing() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.absent
}

// report notes the outcome of a list or watch call: nil mends.
func (w *watched) report(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if (err == nil) != (w.broken == nil) {
		// Waits switch between the cache and the API server.
		close(w.changed)
		w.changed = make(chan struct{})
	}
	switch {
	case err == nil:
		w.broken, w.since = nil, time.Time{}
	case w.broken == nil:
		w.since = time.Now()
		fallthrough
	default:
		w.broken = err
	}
}

// event wakes every wait; it also clears this instance's writes the cache
// now shows.
func (w *watched) event(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if o, err := meta.Accessor(obj); err == nil {
		key := o.GetNamespace() + "/" + o.GetName()
		if ow, ok := w.own[key]; ok && !newer(ow.rv, o.GetResourceVersion()) {
			delete(w.own, key)
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// wrote notes a write of this instance that reads must see: until the
// cache shows namespace/name at resourceVersion rv (or newer), reads of
// the namespace go to the API server. A write the cache shows already
// is not noted: its event came before the write's answer (a watch often
// beats it), and no later event would clear it, so every read of the
// namespace went to the API server for ownWriteFor.
func (w *watched) wrote(obj metav1.Object) {
	if w == nil {
		return
	}
	key := obj.GetNamespace() + "/" + obj.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return
	}
	// The informer puts an object in its store before it calls event,
	// which takes w.mu: either the store shows the write now or event
	// clears the note.
	if o, ok, _ := w.informer.GetIndexer().GetByKey(key); ok {
		if m, err := meta.Accessor(o); err == nil && !newer(obj.GetResourceVersion(), m.GetResourceVersion()) {
			return
		}
	}
	w.own[key] = ownWrite{rv: obj.GetResourceVersion(), until: time.Now().Add(ownWriteFor)}
}

// deleted notes a delete of this instance: reads of the namespace go to
// the API server until the cache has had an event of namespace/name;
// not noted when the cache no longer shows it (as wrote).
func (w *watched) deleted(namespace, name string) {
	if w == nil {
		return
	}
	key := namespace + "/" + name
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return
	}
	if _, ok, _ := w.informer.GetIndexer().GetByKey(key); !ok {
		return
	}
	w.own[key] = ownWrite{until: time.Now().Add(ownWriteFor)}
}

// store returns the indexer to read namespace from, or nil when reads must
// go to the API server: not started, broken, or behind this instance's own
// write in namespace ("" is every namespace).
func (w *watched) store(namespace string) cache.Indexer {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.broken != nil || !w.informer.HasSynced() {
		return nil
	}
	now := time.Now()
	for key, ow := range w.own {
		if now.After(ow.until) {
			delete(w.own, key)
		} else if namespace == "" || strings.HasPrefix(key, namespace+"/") {
			return nil
		}
	}
	return w.informer.GetIndexer()
}

// cachedList returns copies of the objects of st in namespace (every
// namespace when empty), only pool's when pool is not empty.
func cachedList[T any, P interface {
	*T
	metav1.Object
}](st cache.Indexer, namespace, pool string) []T {
	var objs []any
	if pool != "" {
		objs, _ = st.ByIndex(poolIndex, namespace+"/"+pool)
	} else {
		objs = st.List()
	}
	var items []T
	for _, o := range objs {
		if p := o.(P); namespace == "" || p.GetNamespace() == namespace {
			items = append(items, *p)
		}
	}
	return items
}

// next returns the channel closed at the next event.
func (w *watched) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// health returns why the cache does not serve reads, nil when it does.
func (w *watched) health() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.started, w.absent:
		return nil // not asked to cache (reads go to the API server by design), or no such resource
	case w.broken != nil && !w.informer.HasSynced():
		return fmt.Errorf("the cache of %s has not filled since %s UTC (reads go to the API server, retrying with backoff): %v",
			w.what, w.since.UTC().Format(time.TimeOnly), w.broken)
	case w.broken != nil:
		return fmt.Errorf("the watch of %s is broken since %s UTC (reads go to the API server, retrying with backoff): %v",
			w.what, w.since.UTC().Format(time.TimeOnly), w.broken)
	}
	return nil
}
