package engine

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/workloop"
)

// parentKey names one parent in a controller's queue.
type parentKey struct {
	parent    int // index into controller.parents
	namespace string
	name      string
}

func (k parentKey) String() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// parentType is one resource whose objects a controller reconciles.
type parentType struct {
	res                 *discovery.Resource
	sub                 *informer.Subscription
	ignoreStatusChanges bool
	// selects reports whether the controller handles obj (decorator selectors,
	// composite labelSelector).
	selects func(obj *unstructured.Unstructured) bool
}

// childType is one resource a controller manages for its parents.
type childType struct {
	rule   v1alpha1.ResourceRule
	res    *discovery.Resource
	sub    *informer.Subscription
	method v1alpha1.ChildUpdateMethod
	checks *v1alpha1.ChildUpdateStatusChecks // rolling methods: when a moved child is done
}

// hooks are a controller's resolved hook endpoints; nil means the hook is not set.
type hooks struct {
	sync, finalize, customize *hook.Endpoint
}

// controller is one hosted CompositeController or DecoratorController.
type controller struct {
	kind      string // "CompositeController" or "DecoratorController"
	name      string
	object    map[string]any // the controller object, sent to hooks
	finalizer string
	resync    *resyncer // nil without resyncPeriodSeconds
	parents   []*parentType
	children  []*childType
	hooks     hooks
	caller    hookCaller
	flavor    flavor
	related   *relatedTracker
	rollout   *rollout // nil unless a child type rolls and parents are namespaced
	states    *parentStates
	// hookRecorder records the events the hooks answer, from HookEventSource.
	hookRecorder record.EventRecorder
	// loop is what the controller's annotations ask of its work loop; slots, set
	// when they cap its concurrent syncs, holds one token per sync in progress.
	loop  loopSettings
	slots chan struct{}
	// onForbidden, for a namespaced controller, is called when the API server
	// refuses one of its ServiceAccount's requests.
	onForbidden func()

	env      *environment
	queue    workqueue.TypedRateLimitingInterface[parentKey]
	workLoop *workloop.Loop[parentKey] // the workers of queue, set with it
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// flavor is what differs between composite and decorator controllers. A flavor gets
// what it needs when it is built (the environment for its own writes) and per call;
// the sync phases around it are shared.
type flavor interface {
	// observe returns the parent's current children, indexed like types, adopting and
	// releasing where the flavor does that.
	observe(ctx context.Context, p *parentType, parent *unstructured.Unstructured, types []*childType) ([][]*unstructured.Unstructured, error)
	// request is the hook request about in, with the observed children in hook form.
	request(controller map[string]any, in *hookInput, children hookapi.Objects) any
	// answer is an empty hook response to decode into.
	answer() answer
	// check refuses desired children the flavor could not find again.
	check(parent *unstructured.Unstructured, desired []*unstructured.Unstructured) error
	// prepareChild adds what the engine stamps on every desired child.
	prepareChild(parent, child *unstructured.Unstructured)
	// writeParent writes what the hook asked of the parent itself.
	writeParent(ctx context.Context, p *parentType, parent *unstructured.Unstructured, out *outcome) error
}

// answer is a decoded hook response: the outcome without its children, and the
// children as the hook sent them.
type answer interface {
	outcome() (*outcome, []hookapi.Object)
}

// hookCaller sends one hook request and decodes the response; *hook.Client is the
// real one.
type hookCaller interface {
	Call(ctx context.Context, ep hook.Endpoint, info hook.CallInfo, request, response any) error
}

// hookInput is what a sync or finalize hook is told.
type hookInput struct {
	parentType *parentType
	parent     *unstructured.Unstructured
	children   [][]*unstructured.Unstructured
	related    hookapi.Objects
	finalizing bool
	endpoint   *hook.Endpoint
	// events, if set, receives the events of the answer once it is decoded.
	events *hookEvents
}

// outcome is a validated hook response.
type outcome struct {
	desired     []*unstructured.Unstructured
	resyncAfter time.Duration
	finalized   bool
	status      map[string]any     // composite: new status; decorator: nil leaves it
	labels      map[string]*string // decorator only
	annotations map[string]*string // decorator only
	events      []hookapi.Event
}

// start subscribes to every informer, registers handlers and runs workers.
func (c *controller) start(ctx context.Context) error {
	ctx, c.stop = context.WithCancel(ctx)
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		c.loop.rateLimiter(),
		workqueue.TypedRateLimitingQueueConfig[parentKey]{Name: queueName(c.kind, c.name), MetricsProvider: c.env.metrics.queues},
	)
	c.workLoop = c.newLoop()
	for i, p := range c.parents {
		if err := p.sub.AddHandler(c.parentHandler(i)); err != nil {
			return err
		}
	}
	for _, ct := range c.children {
		if err := ct.sub.AddHandler(c.childHandler(ct)); err != nil {
			return err
		}
	}
	if c.rollout != nil {
		// The engine writes revisions itself; only a deletion by someone else
		// needs a sync to put the parent's history back.
		if err := c.rollout.revisions.sub.AddHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { c.enqueueOwner(asObject(obj)) },
		}); err != nil {
			return err
		}
	}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.run(ctx)
	}()
	return nil
}

func (c *controller) run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("controller", c.kind+"/"+c.name)
	ctx = klog.NewContext(ctx, log)
	if !c.waitForCaches(ctx) {
		return
	}
	log.V(1).Info("Controller caches synced")
	if c.resync != nil {
		go c.resync.run(ctx, c.exists, func() bool { return c.queue.Len() >= c.workers() }, c.queue.Add)
	}
	c.workLoop.Run(ctx)
}

// newLoop is the work loop of the controller's queue: it retries, holds a parent
// whose hook asked for a pause (Retry-After), counts syncs and recovers panics.
func (c *controller) newLoop() *workloop.Loop[parentKey] {
	return &workloop.Loop[parentKey]{
		Queue: c.queue, Workers: c.workers(), Process: c.reconcile, Processed: c.processed,
		Metrics: c.env.metrics.loops(), Name: c.name, Result: syncResult,
		Failed: func(ctx context.Context, key parentKey, err error, _ bool) {
			klog.FromContext(ctx).V(1).Info("Sync failed; retrying with backoff", "parent", key.String(), "err", err.Error())
		},
	}
}

// setLoop applies the loop settings of the controller's annotations; call it before
// start.
func (c *controller) setLoop(s loopSettings) {
	c.loop = s
	if s.maxConcurrent > 0 {
		c.slots = make(chan struct{}, c.workers())
	}
}

// workers is how many of the controller's parents sync at once.
func (c *controller) workers() int { return c.loop.workers(c.env.opts.Workers) }

// acquire takes one of the controller's sync slots, when its syncs are capped, and
// returns the function that gives it back. The workers alone keep to the cap; the
// slots keep any sync run outside them to it as well.
func (c *controller) acquire(ctx context.Context) (release func(), err error) {
	if c.slots == nil {
		return func() {}, nil
	}
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *controller) waitForCaches(ctx context.Context) bool {
	for _, p := range c.parents {
		if !p.sub.WaitForSync(ctx) {
			return false
		}
	}
	for _, ct := range c.children {
		if !ct.sub.WaitForSync(ctx) {
			return false
		}
	}
	return c.rollout == nil || c.rollout.revisions.sub.WaitForSync(ctx)
}

// shutdown stops the workers and leaves every informer.
func (c *controller) shutdown() {
	if c.stop != nil {
		c.stop()
	}
	c.done.Wait()
	for _, p := range c.parents {
		p.sub.Close()
	}
	for _, ct := range c.children {
		ct.sub.Close()
	}
	if c.rollout != nil {
		c.rollout.revisions.sub.Close()
	}
	if c.related != nil {
		c.related.close()
	}
}

// exists reports whether the cache holds the parent key names.
func (c *controller) exists(key parentKey) bool {
	_, ok := c.parents[key.parent].sub.Get(key.namespace, key.name)
	return ok
}
