package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/rollout"
)

// countingCompiler records the environments it compiles with and which builds were
// closed.
type countingCompiler struct {
	mu     sync.Mutex
	envs   []map[string]string
	closed int
}

func (c *countingCompiler) Compile(fn lambda.Function) (lambda.Compiled, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.envs = append(c.envs, fn.Env)
	return &countedBuild{c: c}, nil
}

type countedBuild struct {
	c    *countingCompiler
	once sync.Once
}

func (f *countedBuild) Invoke(context.Context, json.RawMessage) (lambda.Result, error) {
	return lambda.Result{Response: json.RawMessage(`{}`)}, nil
}

func (f *countedBuild) Close() {
	f.once.Do(func() {
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		f.c.closed++
	})
}

func (c *countingCompiler) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.envs), c.closed
}

// TestServingBuildsOncePerEnvironment: calls of a function with env sources reuse
// its build while the values stay; new values make one new build with the new
// environment (plain env winning) and retire the old; an unreadable source fails
// calls with one build, retires the one holding values, and queues the function for
// its status once.
func TestServingBuildsOncePerEnvironment(t *testing.T) {
	ctx := context.Background()
	cache, kube, clock := newTestEnvCache(secret("db", map[string]string{"password": "one", "user": "admin"}))
	compiler := &countingCompiler{}
	s := newStore(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), compiler, cache, "http://gw", 10, newMetrics(prometheus.NewRegistry(), func() map[string]lambda.PoolStats { return nil }, nil))
	defer s.queue.ShutDown()
	sources := &envSources{EnvFrom: []fnv1.EnvFromSource{{SecretRef: &fnv1.EnvSourceRef{Name: "db"}}}}
	fn := lambda.Function{Name: "ns/f", Runtime: "python", Source: "x", Timeout: time.Millisecond, Env: map[string]string{"user": "plain"}}
	loaded, err := s.load(ctx, "ns/f", fn, sources, "", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	e := loaded.latest()

	first := s.serving(ctx, e)
	for range 5 {
		if b := s.serving(ctx, e); b != first || b.err != nil {
			t.Fatalf("a call with the same values got another build (%v)", b.err)
		}
	}
	if n, _ := compiler.counts(); n != 1 {
		t.Fatalf("%d compilations for one environment, want 1", n)
	}
	if got := compiler.envs[0]; got["password"] != "one" || got["user"] != "plain" {
		t.Errorf("compiled with %v, want the Secret's password and the plain user", got)
	}

	if _, err := kube.CoreV1().Secrets("ns").Update(ctx, secret("db", map[string]string{"password": "two"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(11 * time.Second)
	second := s.serving(ctx, e)
	if second == first || second.err != nil {
		t.Fatalf("new values kept the old build (%v)", second.err)
	}
	if n, _ := compiler.counts(); n != 2 || compiler.envs[1]["password"] != "two" {
		t.Fatalf("after a rotation: %d compilations, last env %v", n, compiler.envs[len(compiler.envs)-1])
	}

	if err := kube.CoreV1().Secrets("ns").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(11 * time.Second)
	failed := s.serving(ctx, e)
	if !errors.Is(failed.err, ErrEnvSourceUnavailable) || failed.compiled != nil {
		t.Fatalf("a deleted Secret: build %+v, want ErrEnvSourceUnavailable", failed)
	}
	clock.t = clock.t.Add(3 * time.Second) // past the negative TTL: read again, same failure
	if again := s.serving(ctx, e); again != failed {
		t.Errorf("the same failure made another build")
	}
	if s.queue.Len() != 1 {
		t.Errorf("%d keys queued, want the function once (for its status)", s.queue.Len())
	}
	// Both builds that held values are closed once their grace period ends.
	deadline := time.Now().Add(10 * time.Second)
	for _, closed := compiler.counts(); closed < 2 && time.Now().Before(deadline); _, closed = compiler.counts() {
		time.Sleep(50 * time.Millisecond)
	}
	if _, closed := compiler.counts(); closed != 2 {
		t.Errorf("%d builds closed, want the two that held values", closed)
	}
}

// TestLoadServesLiveRevisionsByShare: a function whose previous revision is live
// serves it (read from its ControllerRevision) by the parents' UIDs against the
// shares, the same parent always to the same revision; a unit already loaded is
// reused when the shares move; a revision no longer live is retired.
func TestLoadServesLiveRevisionsByShare(t *testing.T) {
	ctx := context.Background()
	fn := &unstructured.Unstructured{Object: map[string]any{"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": fnv1.Kind, "metadata": map[string]any{"name": "f", "namespace": "ns", "uid": "u1"}}}
	oldSpec := fnv1.FunctionSpec{Runtime: "python", Source: "old", TimeoutSeconds: 1}
	oldName := RevisionName("f", oldSpec)
	old, err := newRevision(fn, &fnv1.Function{Spec: oldSpec}, oldName, 1)
	if err != nil {
		t.Fatal(err)
	}
	cache, _, _ := newTestEnvCache()
	compiler := &countingCompiler{}
	s := newStore(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), old), compiler, cache, "http://gw", 10, newMetrics(prometheus.NewRegistry(), func() map[string]lambda.PoolStats { return nil }, nil))
	defer s.queue.ShutDown()
	if err := s.informer.GetIndexer().Add(fn); err != nil { // the Function, as the store's informer holds it
		t.Fatal(err)
	}
	latest := lambda.Function{Name: "ns/f", Runtime: "python", Source: "new", Timeout: time.Millisecond}
	load := func(live ...fnv1.RevisionShare) *entry {
		t.Helper()
		e, err := s.load(ctx, "ns/f", latest, nil, "f-new", live, true)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	body := func(uid string) []byte { return []byte(`{"parent": {"metadata": {"uid": "` + uid + `"}}}`) }

	e := load(fnv1.RevisionShare{Name: oldName, Revision: 1, Share: 100}, fnv1.RevisionShare{Name: "f-new", Revision: 2, Share: 0})
	for i := range 50 {
		if _, name := e.pick(body(fmt.Sprint("uid-", i))); name != oldName {
			t.Fatalf("at a share of 0 a parent got %s", name)
		}
	}
	if _, name := e.pick([]byte(`{}`)); name != oldName {
		t.Errorf("a call without a UID got %s, want the revision with the largest share", name)
	}
	if u, _ := e.pick(body("x")); u.fn.Source != "old" {
		t.Errorf("the old revision runs %q, want its ControllerRevision's source", u.fn.Source)
	}

	e = load(fnv1.RevisionShare{Name: oldName, Revision: 1, Share: 50}, fnv1.RevisionShare{Name: "f-new", Revision: 2, Share: 50})
	if n, _ := compiler.counts(); n != 2 {
		t.Errorf("%d compilations after the shares moved, want the two revisions' only", n)
	}
	for i := range 200 {
		uid := fmt.Sprint("uid-", i)
		want := oldName
		if rollout.Covered(uid, 50) {
			want = "f-new"
		}
		for range 2 {
			if _, name := e.pick(body(uid)); name != want {
				t.Fatalf("parent %s got %s, want %s", uid, name, want)
			}
		}
		if _, name := e.pick([]byte(`{"object": {"metadata": {"uid": "` + uid + `"}}}`)); name != want {
			t.Fatalf("a decorator's object %s got %s, want %s", uid, name, want)
		}
	}

	e = load(fnv1.RevisionShare{Name: "f-new", Revision: 2, Share: 100})
	if _, name := e.pick(body("x")); name != "f-new" {
		t.Errorf("after the rollout a parent got %s", name)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, closed := compiler.counts(); closed < 1 && time.Now().Before(deadline); _, closed = compiler.counts() {
		time.Sleep(50 * time.Millisecond)
	}
	if n, closed := compiler.counts(); n != 2 || closed != 1 {
		t.Errorf("%d compiled, %d closed; want the old revision closed once no longer live", n, closed)
	}
}

// flakyCompiler loses its worker on the first lost compiles, then compiles; with
// bad set it fails every compile as a source that does not load.
type flakyCompiler struct {
	countingCompiler
	lost int
	bad  bool
}

func (c *flakyCompiler) Compile(fn lambda.Function) (lambda.Compiled, error) {
	c.mu.Lock()
	lost, bad := c.lost > 0, c.bad
	if lost {
		c.lost--
	}
	c.mu.Unlock()
	switch {
	case bad:
		c.mu.Lock()
		c.envs = append(c.envs, fn.Env)
		c.mu.Unlock()
		return nil, &lambda.CompileError{Function: fn.Name, Message: "top-level code threw: boom"}
	case lost:
		c.mu.Lock()
		c.envs = append(c.envs, fn.Env)
		c.mu.Unlock()
		return nil, &lambda.CompileError{Function: fn.Name, Message: "loading the source: worker exited (exit status 2)", Cause: lambda.ErrWorkerLost}
	}
	return c.countingCompiler.Compile(fn)
}

// TestLostWorkerIsLoadedAgain: a load whose worker was lost (a thread it could not
// start) is not kept as the function's outcome: the next refresh builds again and
// serves; a source that does not load is kept, and not built again.
func TestLostWorkerIsLoadedAgain(t *testing.T) {
	ctx := context.Background()
	cache, _, _ := newTestEnvCache()
	for _, tt := range []struct {
		name        string
		compiler    *flakyCompiler
		wantServed  bool
		wantCompile int
	}{
		{"lost once", &flakyCompiler{lost: 1}, true, 2},
		{"does not load", &flakyCompiler{bad: true}, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), tt.compiler, cache, "http://gw", 10, newMetrics(prometheus.NewRegistry(), func() map[string]lambda.PoolStats { return nil }, nil))
			defer s.queue.ShutDown()
			fn := lambda.Function{Name: "ns/f", Runtime: "javascript", Source: "x", Timeout: time.Millisecond}
			e, err := s.load(ctx, "ns/f", fn, nil, "", nil, true)
			if err != nil {
				t.Fatal(err)
			}
			u := e.latest()
			if u.current().err == nil {
				t.Fatal("the first load succeeded")
			}
			b := s.refresh(ctx, u)
			if served := b.err == nil && b.compiled != nil; served != tt.wantServed {
				t.Errorf("after a refresh: err %v, want served %t", b.err, tt.wantServed)
			}
			if n, _ := tt.compiler.counts(); n != tt.wantCompile {
				t.Errorf("%d compiles, want %d", n, tt.wantCompile)
			}
		})
	}
}

// concurrentCompiler holds every Compile until want of them run at once, or
// until its deadline, and records the most that ran at once.
type concurrentCompiler struct {
	want     int
	deadline time.Time

	mu       sync.Mutex
	running  int
	most     int
	release  sync.Once
	released chan struct{}
}

func (c *concurrentCompiler) Compile(lambda.Function) (lambda.Compiled, error) {
	c.mu.Lock()
	c.running++
	c.most = max(c.most, c.running)
	if c.running == c.want {
		c.release.Do(func() { close(c.released) })
	}
	c.mu.Unlock()
	select {
	case <-c.released:
	case <-time.After(time.Until(c.deadline)):
	}
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	return &countedBuild{c: &countingCompiler{}}, nil
}

// TestFunctionsLoadAtOnce: the store loads as many Functions at once as it has
// workers (Options.FunctionWorkers), from the informer's first sync on: a
// gateway with a thousand Functions is not ready until each is loaded once.
func TestFunctionsLoadAtOnce(t *testing.T) {
	const workers, functions = 4, 6
	var objs []runtime.Object
	for i := range functions {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": "Function",
			"metadata": map[string]any{"name": fmt.Sprintf("f%d", i), "namespace": "ns"},
			"spec":     map[string]any{"runtime": "javascript", "source": "function sync() { return {} }"},
		}})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{FunctionsGVR: "FunctionList", {Group: "apps", Version: "v1", Resource: "controllerrevisions"}: "ControllerRevisionList"}, objs...)
	cache, _, _ := newTestEnvCache()
	compiler := &concurrentCompiler{want: workers, deadline: time.Now().Add(20 * time.Second), released: make(chan struct{})}
	s := newStore(dyn, compiler, cache, "http://gw", 10, newMetrics(prometheus.NewRegistry(), func() map[string]lambda.PoolStats { return nil }, nil))
	s.workers = workers
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()
	for !s.synced() && time.Now().Before(compiler.deadline.Add(5*time.Second)) {
		time.Sleep(10 * time.Millisecond)
	}
	if !s.synced() {
		t.Fatal("the Functions were never all loaded")
	}
	compiler.mu.Lock()
	defer compiler.mu.Unlock()
	if compiler.most != workers {
		t.Errorf("at most %d Functions loaded at once, want %d (the store's workers)", compiler.most, workers)
	}
}
