package ingress

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// watcher caches Ingresses, Services and EndpointSlices of every namespace and signals
// changed after any change; several changes before a read make one signal.
type watcher struct {
	factory   informers.SharedInformerFactory
	ingresses networkinglisters.IngressLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	changed   chan struct{}
}

func newWatcher(client kubernetes.Interface) (*watcher, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripManagedFields))
	ingresses := factory.Networking().V1().Ingresses()
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	w := &watcher{
		factory:   factory,
		ingresses: ingresses.Lister(),
		services:  services.Lister(),
		slices:    slices.Lister(),
		changed:   make(chan struct{}, 1),
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { w.notify() }, UpdateFunc: func(any, any) { w.notify() }, DeleteFunc: func(any) { w.notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{ingresses.Informer(), services.Informer(), slices.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *watcher) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// start runs the informers until ctx ends and waits for their caches; false means ctx
// ended first. stop must be called after ctx ends.
func (w *watcher) start(ctx context.Context) bool {
	w.factory.Start(ctx.Done())
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			klog.FromContext(ctx).V(1).Info("Stopped before the caches synced", "type", typ.String())
			return false
		}
	}
	return true
}

func (w *watcher) stop() { w.factory.Shutdown() }

// list reads the world from the caches.
func (w *watcher) list() (world, error) {
	var out world
	var err error
	if out.ingresses, err = w.ingresses.List(labels.Everything()); err != nil {
		return out, err
	}
	if out.services, err = w.services.List(labels.Everything()); err != nil {
		return out, err
	}
	out.slices, err = w.slices.List(labels.Everything())
	return out, err
}

// stripManagedFields drops metadata.managedFields from cached objects: the router
// never reads them.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
