package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
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
	e := s.load(ctx, "ns/f", 1, fn, sources, true)

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
