package engine

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/api"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/engine/slim"
	"github.com/metalambda/metalambda/internal/tracing"
	"github.com/metalambda/metalambda/internal/workloop"
)

// Kinds of controller objects.
const (
	CompositeKind = "CompositeController"
	DecoratorKind = "DecoratorController"
)

var (
	compositeGVR = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "compositecontrollers"}
	decoratorGVR = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "decoratorcontrollers"}
)

// eventFlushTimeout bounds how long Run waits, on its way out, for its last events
// to be written.
const eventFlushTimeout = 3 * time.Second

// controllerKey names a controller object in the manager's queue; namespace is
// empty but for namespaced controllers.
type controllerKey struct{ kind, namespace, name string }

// controllerName is the name of key's controller in metrics, events and the API,
// as controllerName gives it from the object.
func (k controllerKey) controllerName() string {
	if k.namespace != "" {
		return k.namespace + "/" + k.name
	}
	return k.name
}

// Manager hosts one controller per CompositeController and DecoratorController object,
// rebuilding it when the object's spec changes.
type Manager struct {
	env    *environment
	events *eventRecorder
	queue  workqueue.TypedRateLimitingInterface[controllerKey]
	subs   map[string]*informer.Subscription // by kind
	ready  atomic.Bool
	// cfg and kube are the engine's own: namespaced controllers' clients
	// impersonate from cfg; kube asks what their ServiceAccounts may do.
	cfg     *rest.Config
	kube    kubernetes.Interface
	tenants *tenants

	mu     sync.Mutex
	hosted map[controllerKey]*hosted
	// retired holds the last controller of an object that ran and whose rebuild
	// failed (its ServiceAccount lost a right, its spec was made invalid): its
	// finalizers are still on its parents, and it releases them should the object
	// be deleted before a rebuild succeeds.
	retired map[controllerKey]*controller
}

type hosted struct {
	specHash   string
	object     *unstructured.Unstructured // the controller object it was built from
	controller *controller
	stopped    bool
	// forbidden is set when a namespaced controller's write was refused: the next
	// sync of its object checks its rights again.
	forbidden bool
	checking  bool // a check of its rights runs or ran lately
}

// New builds a manager. Every API request it makes is counted in reg.
func New(cfg *rest.Config, opts Options, reg prometheus.Registerer) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m := newMetrics(reg)
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{next: rt, counter: m.apiRequests}
	})
	shareRateLimiter(cfg)
	cl, err := newClients(cfg, opts)
	if err != nil {
		return nil, err
	}
	dyn, meta, watches, kube := cl.dynamic, cl.meta, cl.watches, cl.kube
	rec := newEventRecorder(kube, opts)
	calls := api.NewHistory(opts.HookCallHistory)
	tracer := tracing.Tracer(opts.TracerProvider)
	env := &environment{
		opts:      opts,
		dynamic:   dyn,
		meta:      meta,
		discovery: discovery.NewMap(kube.Discovery()),
		informers: informer.NewFactory(watches, informer.Options{
			Resync: opts.CacheFlushInterval,
			// Three-way apply reads managedFields of observed children.
			DropManagedFields: opts.ApplyStrategy == ServerSideApply,
		}),
		hooks:    &hook.Client{HTTP: opts.HookHTTP, Metrics: hook.NewMetrics(reg), Tracer: tracer},
		recorder: rec.recorder,
		metrics:  m,
		calls:    calls,
		own:      newOwnWrites(),
		tracer:   tracer,
	}
	if calls != nil {
		env.hooks.Recorder = calls
	}
	mgr := &Manager{
		env:    env,
		events: rec,
		// A controller that cannot start usually waits for a person (a missing CRD or
		// status subresource): retry from one second up to five minutes.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[controllerKey](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[controllerKey]{Name: "metalambda-engine", MetricsProvider: m.queues}),
		subs:    map[string]*informer.Subscription{},
		hosted:  map[controllerKey]*hosted{},
		retired: map[controllerKey]*controller{},
		cfg:     cfg,
		kube:    kube,
		tenants: newTenants(),
	}
	if reg != nil {
		reg.MustRegister(&queueCollector{m: mgr, desc: prometheus.NewDesc("metalambda_engine_queue_depth", "Parents waiting in each hosted controller's work queue.", []string{"controller"}, nil)})
	}
	return mgr, nil
}

// clients are the API clients of one identity: the engine's own, or a namespaced
// controller's ServiceAccount it impersonates.
type clients struct {
	dynamic dynamic.Interface
	meta    metaWrites
	watches dynamic.Interface // the informers' client
	kube    kubernetes.Interface
}

func newClients(cfg *rest.Config, opts Options) (*clients, error) {
	if cfg.UserAgent == "" {
		// The shared HTTP client sets the User-Agent of every request, as each
		// client-go client would with its own ("engine/v0.0.0 (linux/amd64)
		// kubernetes/$Format"); built without one, all went out as Go's.
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	meta, err := newMetaWriter(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	watches := dynamic.Interface(dyn)
	if opts.ApplyStrategy == ServerSideApply {
		// The caches drop managedFields; the informers' client leaves them out of
		// every watch event before decoding it.
		if watches, err = slimDynamic(cfg, httpClient); err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &clients{dynamic: dyn, meta: meta, watches: watches, kube: kube}, nil
}

// slimDynamic is a dynamic client that decodes objects without their managedFields.
func slimDynamic(cfg *rest.Config, client *http.Client) (dynamic.Interface, error) {
	rc, err := dynamicREST(cfg, client, func(c *rest.Config) {
		c.NegotiatedSerializer = slim.WithoutManagedFields(c.NegotiatedSerializer)
	})
	if err != nil {
		return nil, err
	}
	return dynamic.New(rc), nil
}

// shareRateLimiter gives cfg one client-side rate limiter, as its QPS and burst say,
// for every client built from it: otherwise each client gets one of its own, and the
// engine as a whole would send more than --client-go-qps.
func shareRateLimiter(cfg *rest.Config) {
	if cfg.RateLimiter != nil {
		return
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst == 0 {
		burst = rest.DefaultBurst
	}
	if qps > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
}

// Ready reports whether the manager has synced its caches and serves controllers.
func (m *Manager) Ready() bool { return m.ready.Load() }

// Run serves until ctx ends, then stops every hosted controller.
func (m *Manager) Run(ctx context.Context) error {
	log := klog.FromContext(ctx)
	// Give the Stopping and Stopped events of the last controllers a moment to be written.
	defer m.events.shutdown(context.WithoutCancel(ctx), eventFlushTimeout)
	if err := m.waitForAPI(ctx); err != nil {
		return err
	}
	go m.env.discovery.Run(ctx, m.env.opts.DiscoveryInterval)
	for kind, gvr := range map[string]schema.GroupVersionResource{CompositeKind: compositeGVR, DecoratorKind: decoratorGVR} {
		sub := m.env.informers.Subscribe(gvr)
		defer sub.Close()
		if err := sub.AddHandler(m.handler(kind)); err != nil {
			return err
		}
		m.subs[kind] = sub
	}
	if err := m.watchNamespaced(ctx); err != nil {
		return err
	}
	for _, sub := range m.subs {
		defer sub.Close() // closing twice is harmless
		if !sub.WaitForSync(ctx) {
			return ctx.Err()
		}
	}
	fns, err := m.watchFunctions(ctx)
	if err != nil {
		return err
	}
	if fns != nil {
		defer fns.sub.Close()
		defer fns.rollouts.queue.ShutDown()
		if !fns.sub.WaitForSync(ctx) {
			return ctx.Err()
		}
		go fns.run(ctx, m.env.opts.CodeChangeSyncRate)
		go fns.rollouts.run(ctx)
	}
	m.ready.Store(true)
	log.Info("Engine ready", "workers", m.env.opts.Workers, "applyStrategy", m.env.opts.ApplyStrategy)
	loop := &workloop.Loop[controllerKey]{
		Queue: m.queue, Workers: 1,
		Process: func(ctx context.Context, key controllerKey) (time.Duration, error) { return 0, m.sync(ctx, key) },
		Failed: func(ctx context.Context, key controllerKey, err error, terminal bool) {
			if terminal {
				klog.FromContext(ctx).Error(err, "Controller not running until its object changes", "kind", key.kind, "name", key.name)
				return
			}
			klog.FromContext(ctx).Error(err, "Controller not running; retrying", "kind", key.kind, "name", key.name)
		},
	}
	loop.Run(ctx)
	m.stopAll()
	return nil
}

// waitForAPI waits until discovery works and serves the metacontroller.k8s.io CRDs.
func (m *Manager) waitForAPI(ctx context.Context) error {
	log := klog.FromContext(ctx)
	for attempt := 0; ; attempt++ {
		err := m.env.discovery.Refresh()
		if err == nil {
			_, errC := m.env.discovery.Get(compositeGVR.GroupVersion().String(), compositeGVR.Resource)
			_, errD := m.env.discovery.Get(decoratorGVR.GroupVersion().String(), decoratorGVR.Resource)
			if err = errors.Join(errC, errD); err == nil {
				return nil
			}
		}
		if attempt%10 == 0 {
			log.Info("Waiting for the API server and the metacontroller.k8s.io CRDs (install crds/)", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (m *Manager) handler(kind string) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if u := asObject(obj); u != nil {
			m.queue.Add(controllerKey{kind: kind, namespace: u.GetNamespace(), name: u.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			enqueue(obj)
			if u := asObject(obj); u != nil && namespacedKind(kind) {
				m.enqueueNamespace(u.GetNamespace()) // one waiting over the quota may run now
			}
		},
	}
}

// sync makes the hosted controller of key match its object.
func (m *Manager) sync(ctx context.Context, key controllerKey) error {
	obj, ok := m.subs[key.kind].Get(key.namespace, key.name)
	if !ok || obj.GetDeletionTimestamp() != nil {
		return m.remove(ctx, key, true)
	}
	if !m.env.opts.TargetSelector.Matches(labels.Set(obj.GetLabels())) {
		return m.remove(ctx, key, false)
	}
	hash := specHash(obj)
	m.mu.Lock()
	current := m.hosted[key]
	m.mu.Unlock()
	if current != nil && current.specHash == hash && !current.forbidden {
		return nil
	}
	if current != nil {
		m.mu.Lock()
		m.retired[key] = current.controller
		m.mu.Unlock()
	}
	if err := m.remove(ctx, key, false); err != nil {
		return err
	}
	loop, invalid := parseLoopSettings(obj.GetAnnotations())
	if len(invalid) > 0 {
		m.env.recorder.Event(obj, corev1.EventTypeWarning, ReasonInvalidAnnotation, strings.Join(invalid, "; "))
	}
	c, unsupported, err := m.build(ctx, obj)
	if err != nil {
		if namespacedKind(key.kind) {
			m.pruneTenantEnvs()
		}
		m.env.recorder.Event(obj, corev1.EventTypeWarning, buildEventReason(err), "Cannot create new controller: "+err.Error())
		if statusErr := m.writeControllerStatus(ctx, obj, err, unsupported, invalid); statusErr != nil {
			return errors.Join(err, statusErr)
		}
		if r := reasonOf(err); r == ReasonMissingRights || r == "RightsUnknown" {
			// A grant starts it: ask again in a while.
			m.queue.AddAfter(key, m.env.opts.RightsRecheckInterval)
			return nil
		}
		if reasonOf(err) == "TooManyControllers" {
			return workloop.Terminal(err) // the deletion of another one queues it again
		}
		if r := reasonOf(err); r == "InvalidSpec" || r == "InvalidHook" {
			return workloop.Terminal(err) // only a change to the object can fix it
		}
		return err
	}
	c.setLoop(loop)
	if namespacedKind(key.kind) {
		c.onForbidden = func() { m.forbidden(key) }
	}
	m.events.lifecycle(obj, key.name, ReasonStarting)
	if err := c.start(ctx); err != nil {
		c.shutdown()
		m.env.recorder.Event(obj, corev1.EventTypeWarning, ReasonCreateError, "Cannot start controller: "+err.Error())
		return err
	}
	m.mu.Lock()
	m.hosted[key] = &hosted{specHash: hash, object: obj, controller: c}
	delete(m.retired, key)
	m.mu.Unlock()
	m.events.lifecycle(obj, key.name, ReasonStarted)
	klog.FromContext(ctx).Info("Controller started", "kind", key.kind, "name", key.name, "workers", c.workers())
	return m.writeControllerStatus(ctx, obj, nil, unsupported, invalid)
}

// remove stops the hosted controller of key. When the controller object is gone,
// release also removes its finalizer from every parent, which would otherwise block
// their deletion forever: the hosted controller's, or the retired one's when its
// rebuild failed.
func (m *Manager) remove(ctx context.Context, key controllerKey, release bool) error {
	m.mu.Lock()
	h, c := m.hosted[key], m.retired[key]
	m.mu.Unlock()
	if h != nil {
		m.stop(key, h)
		c = h.controller
	}
	if c == nil || (h == nil && !release) {
		return nil
	}
	if release {
		if err := c.releaseFinalizers(ctx); err != nil {
			return err
		}
	}
	m.mu.Lock()
	delete(m.hosted, key)
	if release {
		delete(m.retired, key)
	}
	m.mu.Unlock()
	if namespacedKind(key.kind) {
		m.pruneTenantEnvs()
	}
	if release {
		// The controller is gone for good: drop its series, so they do not pile up.
		// They are named as the controller names itself (controllerName): a
		// namespaced controller's as namespace/name.
		name := key.controllerName()
		m.env.hooks.Metrics.Forget(key.kind, name)
		m.env.metrics.forget(key.kind, name)
		m.env.calls.Forget(key.kind, name)
	}
	klog.FromContext(ctx).Info("Controller stopped", "kind", key.kind, "name", key.name)
	return nil
}

// stop shuts a hosted controller down once, recording Stopping and Stopped on its
// controller object like upstream.
func (m *Manager) stop(key controllerKey, h *hosted) {
	if h.stopped {
		return
	}
	m.events.lifecycle(h.object, key.name, ReasonStopping)
	h.controller.shutdown()
	h.stopped = true
	m.events.lifecycle(h.object, key.name, ReasonStopped)
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, h := range m.hosted {
		m.stop(key, h)
		delete(m.hosted, key)
	}
}
