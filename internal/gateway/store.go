package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/rollout"
	"github.com/metalambda/metalambda/internal/workloop"
)

// FunctionsGVR is the resource the gateway watches.
var FunctionsGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}

// entry is one loaded function: its live revisions, and what they share (the
// invocation history and the metric series).
type entry struct {
	key     string // namespace/name
	history *history
	metrics *functionMetrics
	served  atomic.Pointer[served]
}

// served is what an entry serves: its live revisions, newest first, with their
// shares of the parents; latest is the spec's.
type served struct {
	latest *unit
	units  []*unit
	names  []string // the units' ControllerRevisions; "" when it could not be recorded
	shares []int32
}

// unit is one revision of a function, compiled.
type unit struct {
	key     string          // the function's namespace/name
	hash    string          // of what it runs: the code, its plain env and its env sources
	fn      lambda.Function // what it runs, with its plain env; a replay's candidate starts from it
	sources *envSources     // nil: its env is plain

	mu    sync.Mutex // held while a new build is made
	build atomic.Pointer[build]
}

// build is a function compiled with one environment. A function with env sources
// gets a new build when the values they give change: the new build's workers start
// with the new environment, and the old build is retired once its calls had time
// to end.
type build struct {
	envHash  string          // of the environment it runs with; "" when err is not a compile error (or the worker was lost)
	compiled lambda.Compiled // nil when err is set
	err      error           // the compile error, or why the env sources cannot be read
}

// current is what the unit serves now.
func (u *unit) current() *build { return u.build.Load() }

// latest is the unit of the spec's revision.
func (e *entry) latest() *unit { return e.served.Load().latest }

// pick is the revision that serves a call with this hook request body, and its
// ControllerRevision: with several live revisions, by the parent's UID (see
// rollout.Choose).
func (e *entry) pick(body []byte) (*unit, string) {
	sv := e.served.Load()
	if len(sv.units) == 1 {
		return sv.units[0], sv.names[0]
	}
	i := rollout.Choose(parentUID(body), sv.shares)
	return sv.units[i], sv.names[i]
}

// parentUID is the UID of a hook request's parent (parent.metadata.uid, for a
// CompositeController's hooks) or object (object.metadata.uid, for a
// DecoratorController's), or "" for a body that names neither.
func parentUID(body []byte) string {
	type object struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	var req struct {
		Parent *object `json:"parent"`
		Object *object `json:"object"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	if req.Parent != nil && req.Parent.Metadata.UID != "" {
		return req.Parent.Metadata.UID
	}
	if req.Object != nil {
		return req.Object.Metadata.UID
	}
	return ""
}

// storeQueue names the store's work queue, and its work loop's series.
const storeQueue = "functions"

// DefaultFunctionWorkers is the default of Options.FunctionWorkers. Loading a
// Function mostly waits: for a worker to load it, for the API server to record
// its revision and its status. One at a time, a gateway took 103 s to load a
// thousand, four at a time 30 s (docs/gateway.md, Performance).
const DefaultFunctionWorkers = 4

// store keeps every Function compiled and ready, following the cluster.
type store struct {
	dyn       dynamic.Interface
	compiler  compiler
	env       *envCache
	publicURL string
	history   int
	metrics   *metrics
	// maxPerNamespace is how many functions of one namespace are served; 0 is no limit.
	maxPerNamespace int
	// workers is how many functions are loaded at once (Options.FunctionWorkers);
	// the queue never gives one function to two of them.
	workers  int
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]

	mu      sync.RWMutex
	entries map[string]*entry
	retired []lambda.Compiled // replaced or deleted, closed after a grace period or at the end

	// unloaded holds the Functions the cache held when it first synced that
	// have not been loaded once yet (nil before that sync): the gateway is not
	// ready until it is empty, so that a new replica takes no call it would
	// answer "not loaded yet".
	loadMu   sync.Mutex
	unloaded map[string]bool
}

// compiler turns a Function into something callable; *lambda.Registry is one.
type compiler interface {
	Compile(fn lambda.Function) (lambda.Compiled, error)
}

func newStore(dyn dynamic.Interface, c compiler, env *envCache, publicURL string, history int, m *metrics) *store {
	s := &store{
		dyn: dyn, compiler: c, env: env, publicURL: publicURL, history: history, metrics: m,
		entries: map[string]*entry{},
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: storeQueue}),
	}
	s.informer = dynamicinformer.NewFilteredDynamicInformer(dyn, FunctionsGVR, metav1.NamespaceAll, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	// The cache keeps no managedFields, which nothing here reads: a few KiB
	// per Function, with thousands of them. A status update sent from a cached
	// copy, without them, leaves the server's as they are.
	_ = s.informer.SetTransform(stripManagedFields)
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	})
	return s
}

// stripManagedFields drops an object's managedFields as the informer caches
// it, as controller-runtime's cache.TransformStripManagedFields does.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// run loads functions until ctx ends, then closes every compiled function.
func (s *store) run(ctx context.Context) {
	go s.informer.RunWithContext(ctx)
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		unloaded := map[string]bool{}
		for _, key := range s.informer.GetStore().ListKeys() {
			unloaded[key] = true
		}
		s.loadMu.Lock()
		s.unloaded = unloaded
		s.loadMu.Unlock()
		loop := &workloop.Loop[string]{
			Queue: s.queue, Workers: max(s.workers, 1),
			Process: s.sync, Metrics: s.metrics.store, Name: storeQueue,
			Failed: func(ctx context.Context, key string, err error, _ bool) {
				klog.FromContext(ctx).V(1).Info("Function sync failed; retrying", "function", key, "err", err.Error())
			},
		}
		loop.Run(ctx)
	} else {
		s.queue.ShutDown()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, e := range s.entries {
		for _, u := range e.served.Load().units {
			if b := u.current(); b != nil && b.compiled != nil {
				b.compiled.Close()
			}
		}
		delete(s.entries, key)
	}
	for _, c := range s.retired {
		c.Close() // idempotent; leaves no worker process behind
	}
	s.retired = nil
}

// synced reports whether every Function the cache held when it first synced has
// been loaded once (served, or its failure written in its status).
func (s *store) synced() bool {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	return s.unloaded != nil && len(s.unloaded) == 0
}

// loadedOnce notes that key went through a sync, whatever its outcome.
func (s *store) loadedOnce(key string) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	delete(s.unloaded, key)
}

// envRetry is how soon a function whose env sources could not be read is loaded
// again without a call, so that its status follows a grant or a new Secret.
const envRetry = 30 * time.Second

// lostRetry is how soon a function whose worker was lost while loading it (a
// transient failure, such as a thread it could not start) is loaded again: without
// it the failure would be served until the Function changed.
const lostRetry = 5 * time.Second

// sync (re)loads one function and reports the result in its status.
func (s *store) sync(ctx context.Context, key string) (time.Duration, error) {
	defer s.loadedOnce(key)
	obj, exists, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		s.remove(key)
		s.makeRoom(key)
		return 0, nil
	}
	u := obj.(*unstructured.Unstructured)
	if s.pastLimit(u) {
		// Checked again later: an older function deleted makes room.
		s.remove(key)
		return envRetry, s.writeStatus(ctx, u, "", functionLimitError(u.GetNamespace(), s.maxPerNamespace), nil)
	}
	var f fnv1.Function
	if err := jsonvalue.Convert(u.Object, &f); err != nil {
		return 0, s.writeStatus(ctx, u, "", fmt.Errorf("decode Function: %w", err), nil)
	}
	if errs := fnv1.ValidateEnvSources(&f.Spec); len(errs) > 0 {
		return 0, s.writeStatus(ctx, u, "", fmt.Errorf("function %s: %w: %v", key, errInvalidSpec, errs.ToAggregate()), nil)
	}
	if errs := fnv1.ValidateRollout(&f.Spec); len(errs) > 0 {
		return 0, s.writeStatus(ctx, u, "", fmt.Errorf("function %s: %w: %v", key, errInvalidSpec, errs.ToAggregate()), nil)
	}
	current, live, revErr := s.recordRevision(ctx, u, &f)
	if revErr != nil {
		// Served alone, unrecorded, until the revision can be recorded.
		current, live = "", nil
	}
	fn := toRuntime(u.GetNamespace(), u.GetName(), &f.Spec)
	e, err := s.load(ctx, key, fn, sourcesOf(&f.Spec), current, live, historyEnabled(u))
	if err != nil {
		return 0, err
	}
	latest := e.latest()
	b := latest.current()
	if latest.sources != nil || errors.Is(b.err, lambda.ErrWorkerLost) {
		b = s.refresh(ctx, latest)
	}
	var after time.Duration
	switch {
	case errors.Is(b.err, ErrEnvSourceUnavailable):
		after = envRetry
	case errors.Is(b.err, lambda.ErrWorkerLost):
		after = lostRetry
	}
	var revs *revisionStatus
	if revErr == nil {
		revs = &revisionStatus{current: current, live: live}
	}
	return after, errors.Join(s.writeStatus(ctx, u, sourceHash(fn.Source), b.err, revs), revErr)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// errInvalidSpec is a Function the CRD's schema should have refused.
var errInvalidSpec = errors.New("invalid spec")

// load makes the entry serve latest (the spec's revision, current) and the other
// live revisions, building each unless it is loaded already, and retires the units
// no longer live. live is nil when the revisions could not be recorded: latest is
// then served alone. record turns the invocation history on or off, before a new
// entry is served.
func (s *store) load(ctx context.Context, key string, latest lambda.Function, sources *envSources, current string, live []fnv1.RevisionShare, record bool) (*entry, error) {
	s.mu.RLock()
	e := s.entries[key]
	s.mu.RUnlock()
	var before *served
	if e != nil {
		before = e.served.Load()
	}
	next, err := s.liveUnits(ctx, key, before, latest, sources, current, live)
	if err != nil {
		return nil, err
	}
	if e == nil {
		namespace, name, _ := cache.SplitMetaNamespaceKey(key)
		e = &entry{key: key, history: newHistory(s.history), metrics: s.metrics.forFunction(namespace, name)}
	}
	e.history.setEnabled(record)
	e.served.Store(next)
	s.mu.Lock()
	s.entries[key] = e
	s.mu.Unlock()
	if before != nil {
		for _, u := range before.units {
			if !slices.Contains(next.units, u) {
				s.retireUnit(u, u.fn.Timeout)
			}
		}
	}
	return e, nil
}

// liveUnits builds what an entry serves: a unit per live revision, newest first,
// the ones already loaded (by what they run) reused.
func (s *store) liveUnits(ctx context.Context, key string, before *served, latest lambda.Function, sources *envSources, current string, live []fnv1.RevisionShare) (*served, error) {
	unitFor := func(fn lambda.Function, sources *envSources) *unit {
		hash := specHash(fn, sources)
		if before != nil {
			if i := slices.IndexFunc(before.units, func(u *unit) bool { return u.hash == hash }); i >= 0 {
				return before.units[i]
			}
		}
		u := &unit{key: key, hash: hash, fn: fn, sources: sources}
		s.refresh(ctx, u)
		return u
	}
	next := &served{latest: unitFor(latest, sources)}
	if len(live) == 0 {
		next.units, next.names, next.shares = []*unit{next.latest}, []string{current}, []int32{100}
		return next, nil
	}
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	byNewest := slices.SortedFunc(slices.Values(live), func(a, b fnv1.RevisionShare) int { return cmp.Compare(b.Revision, a.Revision) })
	for _, r := range byNewest {
		u := next.latest
		if r.Name != current {
			u = s.loadedRevision(before, r.Name)
			if u == nil {
				spec, err := s.revisionSpec(ctx, key, r.Name)
				if err != nil {
					return nil, err
				}
				u = unitFor(toRuntime(namespace, name, &spec), sourcesOf(&spec))
			}
		}
		next.units, next.names, next.shares = append(next.units, u), append(next.names, r.Name), append(next.shares, r.Share)
	}
	if !slices.Contains(next.names, current) { // not listed yet: no share
		next.units, next.names, next.shares = append([]*unit{next.latest}, next.units...), append([]string{current}, next.names...), append([]int32{0}, next.shares...)
	}
	return next, nil
}

// loadedRevision is the unit before served as the revision name, if any.
func (s *store) loadedRevision(before *served, name string) *unit {
	if before == nil {
		return nil
	}
	if i := slices.Index(before.names, name); i >= 0 && name != "" {
		return before.units[i]
	}
	return nil
}

// serving is the build a call of u runs: for a function with env sources, the one
// of the values they give now (read through the cache), built if they changed. When
// the outcome changes (the sources became unreadable, or readable again), the
// function is queued so that its status follows.
func (s *store) serving(ctx context.Context, u *unit) *build {
	if u.sources == nil {
		return u.current()
	}
	before := u.current()
	b := s.refresh(ctx, u)
	if b != before && (before == nil || errText(before.err) != errText(b.err)) {
		s.queue.Add(u.key)
	}
	return b
}

// refresh reads e's env sources and makes a new build when the environment they
// give differs from the current build's (or there is none yet). A source that
// cannot be read makes a build that fails every call, and retires the previous one:
// its workers hold values the gateway may no longer read.
func (s *store) refresh(ctx context.Context, e *unit) *build {
	namespace, name, _ := cache.SplitMetaNamespaceKey(e.key)
	fromSources, err := s.env.resolve(ctx, namespace+"/"+name, namespace, e.sources)
	if err != nil {
		return s.replace(e, func(cur *build) *build {
			if cur != nil && cur.compiled == nil && errText(cur.err) == err.Error() {
				return nil // the same failure: no change for callers or the status
			}
			return &build{err: err}
		})
	}
	env := mergeEnv(fromSources, e.fn.Env)
	hash := envHash(env)
	if b := e.current(); b != nil && b.envHash == hash {
		return b
	}
	return s.replace(e, func(cur *build) *build {
		if cur != nil && cur.envHash == hash {
			return nil // another call built it meanwhile
		}
		fn := e.fn
		fn.Env = env
		compiled, err := s.compiler.Compile(fn)
		if errors.Is(err, lambda.ErrWorkerLost) {
			return &build{err: err} // no envHash: the next refresh builds again
		}
		return &build{envHash: hash, compiled: compiled, err: err}
	})
}

// replace swaps e's build for what makeBuild returns (nil keeps the current one),
// one caller at a time, and retires the replaced build.
func (s *store) replace(e *unit, makeBuild func(cur *build) *build) *build {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.current()
	next := makeBuild(cur)
	if next == nil {
		return cur
	}
	e.build.Store(next)
	if cur != nil && cur.compiled != nil {
		s.retire(cur.compiled, e.fn.Timeout)
	}
	return next
}

// retire closes a replaced function once calls already running on it had time to end,
// or when the store stops, whichever comes first.
func (s *store) retire(c lambda.Compiled, timeout time.Duration) {
	s.mu.Lock()
	s.retired = append(s.retired, c)
	s.mu.Unlock()
	time.AfterFunc(timeout+time.Second, func() {
		c.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, r := range s.retired {
			if r == c {
				s.retired = append(s.retired[:i], s.retired[i+1:]...)
				break
			}
		}
	})
}

// remove unloads a deleted function and drops its metric series.
func (s *store) remove(key string) {
	s.mu.Lock()
	e := s.entries[key]
	delete(s.entries, key)
	s.mu.Unlock()
	if e == nil {
		return
	}
	e.metrics.remove()
	for _, u := range e.served.Load().units {
		s.retireUnit(u, 10*time.Second)
	}
}

// retireUnit retires a unit's build (see retire).
func (s *store) retireUnit(u *unit, timeout time.Duration) {
	if b := u.current(); b != nil && b.compiled != nil {
		s.retire(b.compiled, timeout)
	}
}

func (s *store) get(namespace, name string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.entries[namespace+"/"+name]
}

// hookURL is where engines call the function.
func (s *store) hookURL(namespace, name string) string {
	return fmt.Sprintf("%s/hooks/%s/%s", s.publicURL, namespace, name)
}

// revisionStatus is what the gateway writes of status.currentRevision and
// status.revisions.
type revisionStatus struct {
	current string
	live    []fnv1.RevisionShare
}

// writeStatus records url, sourceHash, the revisions (unless revs is nil) and the
// Ready condition, unless they already hold. The update is made from the informer's
// object, with its resourceVersion, so that fields other writers own (the rollout
// driver's status.rollout and shares) are kept or the update conflicts and is
// retried.
func (s *store) writeStatus(ctx context.Context, u *unstructured.Unstructured, hash string, loadErr error, revs *revisionStatus) error {
	var status fnv1.FunctionStatus
	if raw, ok := u.Object["status"]; ok {
		_ = jsonvalue.Convert(raw, &status)
	}
	want := status
	want.ObservedGeneration = u.GetGeneration()
	want.URL = s.hookURL(u.GetNamespace(), u.GetName())
	want.SourceHash = hash
	if revs != nil {
		want.CurrentRevision, want.Revisions = revs.current, revs.live
	}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Compiled", Message: "the function is served at " + want.URL, ObservedGeneration: u.GetGeneration()}
	if loadErr != nil {
		ready = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "CompileError", Message: loadErr.Error(), ObservedGeneration: u.GetGeneration()}
		switch {
		case errors.Is(loadErr, lambda.ErrUnknownRuntime), errors.Is(loadErr, errInvalidSpec):
			ready.Reason = "InvalidSpec"
		case errors.Is(loadErr, ErrEnvSourceUnavailable):
			ready.Reason = "EnvSourceUnavailable"
		case errors.Is(loadErr, ErrNetworkNotAllowed):
			ready.Reason = "NetworkNotAllowed"
		case errors.Is(loadErr, ErrTooManyFunctions):
			ready.Reason = "TooManyFunctions"
		}
	}
	want.Conditions = append([]metav1.Condition(nil), status.Conditions...)
	meta.SetStatusCondition(&want.Conditions, ready)
	if jsonvalue.Equal(status, want) {
		return nil
	}
	newStatus, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return err
	}
	updated := u.DeepCopy()
	updated.Object["status"] = newStatus
	_, err = s.dyn.Resource(FunctionsGVR).Namespace(u.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

const fieldManager = "metalambda-gateway"

// historyEnabled reads spec.history.enabled; a Function that does not say records.
func historyEnabled(u *unstructured.Unstructured) bool {
	enabled, found, err := unstructured.NestedBool(u.Object, "spec", "history", "enabled")
	return !found || err != nil || enabled
}

func toRuntime(namespace, name string, spec *fnv1.FunctionSpec) lambda.Function {
	timeout := 10 * time.Second
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds) * time.Second
	}
	return lambda.Function{
		Name: namespace + "/" + name, Runtime: spec.Runtime, Source: spec.Source,
		Handler: spec.Handler, Timeout: timeout, Env: spec.Env, Network: spec.Network,
	}
}

// specHash identifies what a function runs: its code, plain env and env sources
// (the references, not the values they give).
func specHash(fn lambda.Function, sources *envSources) string {
	data, _ := json.Marshal([]any{fn.Runtime, fn.Source, fn.Handler, fn.Timeout.String(), fn.Env, fn.Network, sources})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// sourceHash is the sha256 of a function's source, as status.sourceHash reports it.
func sourceHash(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])
}
