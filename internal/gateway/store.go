package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/metalambda/metalambda/internal/workloop"
)

// FunctionsGVR is the resource the gateway watches.
var FunctionsGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}

// entry is one loaded function.
type entry struct {
	key        string // namespace/name
	generation int64
	hash       string          // of the spec: the code, its plain env and its env sources
	fn         lambda.Function // what it runs, with its plain env; a replay's candidate starts from it
	sources    *envSources     // nil: its env is plain
	history    *history
	metrics    *functionMetrics

	mu    sync.Mutex // held while a new build is made
	build atomic.Pointer[build]
}

// build is a function compiled with one environment. A function with env sources
// gets a new build when the values they give change: the new build's workers start
// with the new environment, and the old build is retired once its calls had time
// to end.
type build struct {
	envHash  string          // of the environment it runs with; "" when err is not a compile error
	compiled lambda.Compiled // nil when err is set
	err      error           // the compile error, or why the env sources cannot be read
}

// current is what the entry serves now.
func (e *entry) current() *build { return e.build.Load() }

// storeQueue names the store's work queue, and its work loop's series.
const storeQueue = "functions"

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
	informer        cache.SharedIndexInformer
	queue           workqueue.TypedRateLimitingInterface[string]

	mu      sync.RWMutex
	entries map[string]*entry
	retired []lambda.Compiled // replaced or deleted, closed after a grace period or at the end
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

// run loads functions until ctx ends, then closes every compiled function.
func (s *store) run(ctx context.Context) {
	go s.informer.RunWithContext(ctx)
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		loop := &workloop.Loop[string]{
			Queue: s.queue, Workers: 1,
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
		if b := e.current(); b != nil && b.compiled != nil {
			b.compiled.Close()
		}
		delete(s.entries, key)
	}
	for _, c := range s.retired {
		c.Close() // idempotent; leaves no worker process behind
	}
	s.retired = nil
}

func (s *store) synced() bool { return s.informer.HasSynced() }

// envRetry is how soon a function whose env sources could not be read is loaded
// again without a call, so that its status follows a grant or a new Secret.
const envRetry = 30 * time.Second

// sync (re)loads one function and reports the result in its status.
func (s *store) sync(ctx context.Context, key string) (time.Duration, error) {
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
		return envRetry, s.writeStatus(ctx, u, "", functionLimitError(u.GetNamespace(), s.maxPerNamespace))
	}
	var f fnv1.Function
	if err := jsonvalue.Convert(u.Object, &f); err != nil {
		return 0, s.writeStatus(ctx, u, "", fmt.Errorf("decode Function: %w", err))
	}
	if errs := fnv1.ValidateEnvSources(&f.Spec); len(errs) > 0 {
		return 0, s.writeStatus(ctx, u, "", fmt.Errorf("function %s: %w: %v", key, errInvalidSpec, errs.ToAggregate()))
	}
	fn := toRuntime(u.GetNamespace(), u.GetName(), &f.Spec)
	e := s.load(ctx, key, u.GetGeneration(), fn, sourcesOf(&f.Spec), historyEnabled(u))
	b := e.current()
	if e.sources != nil {
		b = s.refresh(ctx, e)
	}
	var after time.Duration
	if errors.Is(b.err, ErrEnvSourceUnavailable) {
		after = envRetry
	}
	return after, s.writeStatus(ctx, u, sourceHash(fn.Source), b.err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// errInvalidSpec is a Function the CRD's schema should have refused.
var errInvalidSpec = errors.New("invalid spec")

// load builds fn unless the loaded entry already runs exactly this spec. record
// turns its invocation history on or off, before a new entry is served.
func (s *store) load(ctx context.Context, key string, generation int64, fn lambda.Function, sources *envSources, record bool) *entry {
	hash := specHash(fn, sources)
	s.mu.RLock()
	old := s.entries[key]
	s.mu.RUnlock()
	if old != nil && old.hash == hash {
		old.history.setEnabled(record)
		return old
	}
	e := &entry{key: key, generation: generation, hash: hash, fn: fn, sources: sources}
	if old != nil {
		e.history, e.metrics = old.history, old.metrics
	} else {
		namespace, name, _ := cache.SplitMetaNamespaceKey(key)
		e.history, e.metrics = newHistory(s.history), s.metrics.forFunction(namespace, name)
	}
	e.history.setEnabled(record)
	s.refresh(ctx, e)
	s.mu.Lock()
	s.entries[key] = e
	s.mu.Unlock()
	if old != nil {
		if b := old.current(); b != nil && b.compiled != nil {
			s.retire(b.compiled, fn.Timeout)
		}
	}
	return e
}

// serving is the build a call of e runs: for a function with env sources, the one
// of the values they give now (read through the cache), built if they changed. When
// the outcome changes (the sources became unreadable, or readable again), the
// function is queued so that its status follows.
func (s *store) serving(ctx context.Context, e *entry) *build {
	if e.sources == nil {
		return e.current()
	}
	before := e.current()
	b := s.refresh(ctx, e)
	if b != before && (before == nil || errText(before.err) != errText(b.err)) {
		s.queue.Add(e.key)
	}
	return b
}

// refresh reads e's env sources and makes a new build when the environment they
// give differs from the current build's (or there is none yet). A source that
// cannot be read makes a build that fails every call, and retires the previous one:
// its workers hold values the gateway may no longer read.
func (s *store) refresh(ctx context.Context, e *entry) *build {
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
		return &build{envHash: hash, compiled: compiled, err: err}
	})
}

// replace swaps e's build for what makeBuild returns (nil keeps the current one),
// one caller at a time, and retires the replaced build.
func (s *store) replace(e *entry, makeBuild func(cur *build) *build) *build {
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
	if b := e.current(); b != nil && b.compiled != nil {
		s.retire(b.compiled, 10*time.Second)
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

// writeStatus records url, sourceHash and the Ready condition, unless they already
// hold.
func (s *store) writeStatus(ctx context.Context, u *unstructured.Unstructured, hash string, loadErr error) error {
	var status fnv1.FunctionStatus
	if raw, ok := u.Object["status"]; ok {
		_ = jsonvalue.Convert(raw, &status)
	}
	want := status
	want.ObservedGeneration = u.GetGeneration()
	want.URL = s.hookURL(u.GetNamespace(), u.GetName())
	want.SourceHash = hash
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
