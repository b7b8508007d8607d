// Package informer shares one dynamic informer per resource (and label selector)
// across every hosted controller. Informers are reference-counted: the first
// subscriber starts one, the last to leave stops it, and each subscriber's event
// handlers are removed when it leaves. Their lists and watches retry in place while
// the API server is unavailable (see rejoining), so that the caches follow it again
// within seconds of a restart.
package informer

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Index names.
const (
	// ByControllerUID indexes objects by the UID of their controller ownerReference.
	ByControllerUID = "controllerUID"
	// Orphans indexes objects without a controller, under the key of their namespace
	// ("" for cluster-scoped objects).
	Orphans = "orphans"
)

// Options configure a Factory.
type Options struct {
	// Resync is how often informers replay their cache to their handlers (0: never).
	Resync time.Duration
	// DropManagedFields leaves metadata.managedFields out of cached objects: nobody
	// reads them from the cache when children are written with server-side apply,
	// and they are often the bulk of an object.
	DropManagedFields bool
	// Namespace, when set, limits every informer to the objects of that namespace
	// (a namespaced controller's, whose client may list no other).
	Namespace string
}

// Factory hands out shared informers.
type Factory struct {
	client dynamic.Interface
	opts   Options

	mu        sync.Mutex
	informers map[informerKey]*Shared
}

// informerKey tells shared informers apart.
type informerKey struct {
	gvr      schema.GroupVersionResource
	selector string // label selector the API server filters by; "" for all objects
}

// NewFactory returns a factory that lists and watches with client.
func NewFactory(client dynamic.Interface, opts Options) *Factory {
	return &Factory{client: client, opts: opts, informers: map[informerKey]*Shared{}}
}

// Shared is one running informer.
type Shared struct {
	key      informerKey
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	refs     int
}

// Subscription is one subscriber's use of a shared informer.
type Subscription struct {
	factory  *Factory
	shared   *Shared
	handlers []cache.ResourceEventHandlerRegistration
	once     sync.Once
}

// Subscribe starts (or joins) the informer of every object of gvr. Call Close when
// done.
func (f *Factory) Subscribe(gvr schema.GroupVersionResource) *Subscription {
	return f.subscribe(informerKey{gvr: gvr})
}

// SubscribeSelected starts (or joins) the informer of the objects of gvr whose labels
// match selector, filtered by the API server: objects outside it cost nothing.
func (f *Factory) SubscribeSelected(gvr schema.GroupVersionResource, selector labels.Selector) *Subscription {
	return f.subscribe(informerKey{gvr: gvr, selector: selector.String()})
}

func (f *Factory) subscribe(key informerKey) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.informers[key]
	if s == nil {
		s = f.start(key)
		f.informers[key] = s
	}
	s.refs++
	return &Subscription{factory: f, shared: s}
}

func (f *Factory) start(key informerKey) *Shared {
	var resource dynamic.ResourceInterface = f.client.Resource(key.gvr)
	if f.opts.Namespace != "" {
		resource = f.client.Resource(key.gvr).Namespace(f.opts.Namespace)
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = key.selector
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = key.selector
			return resource.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(rejoin(lw, key.gvr.String()), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
		ResyncPeriod: f.opts.Resync,
		Indexers: cache.Indexers{
			cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
			ByControllerUID:      controllerUIDIndex,
			Orphans:              orphanIndex,
		},
		ObjectDescription: key.gvr.String(),
	})
	if f.opts.DropManagedFields {
		_ = inf.SetTransform(dropManagedFields)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go inf.RunWithContext(ctx)
	return &Shared{key: key, informer: inf, stop: cancel}
}

// dropManagedFields is the transform of Options.DropManagedFields.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return obj, nil
}

// Active returns how many informers run; tests and metrics use it.
func (f *Factory) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.informers)
}

// Close removes this subscriber's handlers and stops the informer if nobody else uses
// it. Safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		for _, h := range s.handlers {
			_ = s.shared.informer.RemoveEventHandler(h)
		}
		f := s.factory
		f.mu.Lock()
		defer f.mu.Unlock()
		s.shared.refs--
		if s.shared.refs == 0 {
			s.shared.stop()
			delete(f.informers, s.shared.key)
		}
	})
}

// AddHandler registers event handlers for this subscriber.
func (s *Subscription) AddHandler(h cache.ResourceEventHandler) error {
	reg, err := s.shared.informer.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.shared.key.gvr, err)
	}
	s.handlers = append(s.handlers, reg)
	return nil
}

// HasSynced reports whether the informer's initial list is complete and every handler
// of this subscriber has seen it.
func (s *Subscription) HasSynced() bool {
	if !s.shared.informer.HasSynced() {
		return false
	}
	for _, h := range s.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until HasSynced or ctx ends.
func (s *Subscription) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.HasSynced)
}

// Get returns the cached object ns/name ("" namespace for cluster-scoped objects).
func (s *Subscription) Get(namespace, name string) (*unstructured.Unstructured, bool) {
	obj, ok, err := s.shared.informer.GetIndexer().GetByKey(objectKey(namespace, name))
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// Has reports whether the cache holds ns/name.
func (s *Subscription) Has(namespace, name string) bool {
	_, ok, err := s.shared.informer.GetIndexer().GetByKey(objectKey(namespace, name))
	return err == nil && ok
}

func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// List returns cached objects in namespace (all namespaces when namespace is "").
func (s *Subscription) List(namespace string) []*unstructured.Unstructured {
	if namespace == "" {
		return toObjects(s.shared.informer.GetIndexer().List())
	}
	return s.ByIndex(cache.NamespaceIndex, namespace)
}

// ByIndex returns cached objects under an index key.
func (s *Subscription) ByIndex(index, key string) []*unstructured.Unstructured {
	objs, err := s.shared.informer.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil
	}
	return toObjects(objs)
}

// Controlled returns the cached objects whose controller is uid.
func (s *Subscription) Controlled(uid types.UID) []*unstructured.Unstructured {
	return s.ByIndex(ByControllerUID, string(uid))
}

func toObjects(items []any) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		if u, ok := item.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

func controllerUIDIndex(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

func orphanIndex(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || metav1.GetControllerOfNoCopy(u) != nil {
		return nil, nil
	}
	return []string{u.GetNamespace()}, nil
}
