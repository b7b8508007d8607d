// Package informer shares one dynamic informer per resource across every hosted
// controller. Informers are reference-counted: the first subscriber starts one, the
// last to leave stops it, and each subscriber's event handlers are removed when it
// leaves.
package informer

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
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

// Factory hands out shared informers.
type Factory struct {
	client dynamic.Interface
	resync time.Duration

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]*Shared
}

// NewFactory returns a factory whose informers replay their cache every resync
// (0 disables replays).
func NewFactory(client dynamic.Interface, resync time.Duration) *Factory {
	return &Factory{client: client, resync: resync, informers: map[schema.GroupVersionResource]*Shared{}}
}

// Shared is one running informer.
type Shared struct {
	gvr      schema.GroupVersionResource
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

// Subscribe starts (or joins) the informer of gvr. Call Close when done.
func (f *Factory) Subscribe(gvr schema.GroupVersionResource) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.informers[gvr]
	if s == nil {
		s = f.start(gvr)
		f.informers[gvr] = s
	}
	s.refs++
	return &Subscription{factory: f, shared: s}
}

func (f *Factory) start(gvr schema.GroupVersionResource) *Shared {
	inf := dynamicinformer.NewFilteredDynamicInformer(f.client, gvr, metav1.NamespaceAll, f.resync, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		ByControllerUID:      controllerUIDIndex,
		Orphans:              orphanIndex,
	}, nil).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	go inf.RunWithContext(ctx)
	return &Shared{gvr: gvr, informer: inf, stop: cancel}
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
			delete(f.informers, s.shared.gvr)
		}
	})
}

// AddHandler registers event handlers for this subscriber.
func (s *Subscription) AddHandler(h cache.ResourceEventHandler) error {
	reg, err := s.shared.informer.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.shared.gvr, err)
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
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := s.shared.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*unstructured.Unstructured), true
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
