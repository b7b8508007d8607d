// Command bench-replicas measures what routing does to a gateway with replicas: n
// Functions (a third each of JavaScript, Python and Jsonnet) are registered on a
// real API server and served by r in-process gateway replicas; each Function is then
// called k times, in a random order by concurrent callers, twice over with fresh
// replicas: once with every call sent to a replica at random (what a Service does
// with new connections), once routed as the engine routes hook calls with
// --gateway-service (hook.Sharded: rendezvous hashing of the Function over the
// replicas). It prints, per routing and replica, the calls served, the workers
// started (cold starts), the workers alive at the end and the evictions, and the
// share of calls that found a warm worker.
//
//	go run ./hack/bench-replicas -n 300 -replicas 3
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metalambda/metalambda/hack/internal/benchkit"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var request = []byte(`{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"replicas"},"spec":{}},"children":{"ConfigMap.v1":{}},"related":{},"finalizing":false}`)

const namespace = "replicas"

// service is the name the sharded routing takes the replicas' Service to have.
const service = "gateway.bench"

func main() {
	lambda.ServeWorker() // the sandbox starts this executable as its launcher and workers
	n := flag.Int("n", 300, "Functions, a third of each runtime")
	replicas := flag.Int("replicas", 3, "gateway replicas")
	calls := flag.Int("calls", 3, "calls of each Function")
	clients := flag.Int("clients", 16, "concurrent callers")
	budget := flag.Int64("budget-mib", 1024, "each replica's --worker-memory-budget, in MiB")
	flag.Parse()
	if err := run(*n, *replicas, *calls, *clients, *budget<<20); err != nil {
		fmt.Fprintln(os.Stderr, "bench-replicas:", err)
		os.Exit(1)
	}
}

// result is one routing's pass.
type result struct {
	routing string
	served  []int
	errors  int
	// before and after are each replica's runtime counts once it was ready
	// (registering compiles every Function once, a worker start) and after the
	// calls.
	before, after []lambda.PoolStats
}

func run(n, replicas, calls, clients int, budget int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cp, err := benchkit.StartControlPlane(ctx)
	if err != nil {
		return err
	}
	defer cp.Stop()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	names := make([]string, n)
	for i := range n {
		rt := benchkit.Runtimes[i%len(benchkit.Runtimes)]
		names[i] = fmt.Sprintf("%s-%04d", rt, i)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
			"metadata": map[string]any{"name": names[i]}, "spec": map[string]any{"runtime": rt, "source": benchkit.Hooks[rt]},
		}}
		if _, err := dyn.Resource(gateway.FunctionsGVR).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	order := make([]int, 0, n*calls)
	for range calls {
		for i := range n {
			order = append(order, i)
		}
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	var results []*result
	for _, routing := range []string{"random replica", "sharded (hook.Sharded)"} {
		r, err := pass(ctx, cp, routing, names, order, replicas, clients, budget)
		if err != nil {
			return err
		}
		results = append(results, r)
	}

	fmt.Printf("\n%d Functions (%v), %d calls each in a random order by %d callers, %d replicas, worker budget %d MiB each\n",
		n, benchkit.Runtimes, calls, clients, replicas, budget>>20)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "routing\treplica\tcalls\tworkers started by the calls\tworkers alive after\tevictions\t")
	for _, r := range results {
		var calls, starts int
		for i := range r.served {
			s, b := r.after[i], r.before[i]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", r.routing, i, r.served[i], s.Starts-b.Starts, s.Idle+s.Busy, s.Evictions-b.Evictions)
			calls += r.served[i]
			starts += int(s.Starts - b.Starts)
		}
		fmt.Fprintf(tw, "%s\tall\t%d\t%d\t\t\t\n", r.routing, calls, starts)
		fmt.Fprintf(tw, "%s\twarm hits\t%.1f%%\terrors %d\t\t\t\n", r.routing, 100*float64(calls-starts)/float64(max(calls, 1)), r.errors)
	}
	return tw.Flush()
}

// pass starts fresh replicas, waits until each serves every Function, makes the
// calls with routing, and stops the replicas.
func pass(ctx context.Context, cp *cluster.Cluster, routing string, names []string, order []int, replicas, clients int, budget int64) (*result, error) {
	bases := make([]string, replicas)
	gws := make([]*gateway.Gateway, replicas)
	for i := range replicas {
		opts := gateway.Defaults()
		opts.MaxFunctionsPerNamespace = len(names)
		opts.Runtime.WorkerIdleTimeout = 10 * time.Minute
		opts.Runtime.MemoryBudget = lambda.NewMemoryBudget(budget)
		base, gw, stop, err := benchkit.StartGateway(cp, opts)
		if err != nil {
			return nil, err
		}
		defer stop()
		bases[i], gws[i] = base, gw
	}
	if err := kubetest.Wait(ctx, 10*time.Minute, func(context.Context) (bool, error) {
		for _, gw := range gws {
			if !gw.Ready() {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, fmt.Errorf("the replicas never became ready: %w", err)
	}
	r := &result{routing: routing, served: make([]int, replicas)}
	time.Sleep(3 * time.Second) // the registration checks' workers stop
	for _, gw := range gws {
		r.before = append(r.before, sum(gw.RuntimeStats()))
	}
	addrs := make([]string, replicas)
	index := map[string]int{}
	for i, b := range bases {
		u, _ := url.Parse(b)
		addrs[i], index[u.Host] = u.Host, i
	}
	// The replica each call reached, seen by the transport.
	var mu sync.Mutex
	transport := &countingTransport{next: &http.Transport{MaxIdleConnsPerHost: 64}, reached: func(host string) {
		mu.Lock()
		r.served[index[host]]++
		mu.Unlock()
	}}
	sharded := hook.Sharded{Service: service, Endpoints: func() []string { return addrs }, Next: &http.Client{Transport: transport, Timeout: 30 * time.Second}}
	direct := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	send := func(fn string) error {
		if routing == "random replica" {
			return post(direct, "http://"+addrs[rand.IntN(len(addrs))]+"/hooks/"+namespace+"/"+fn)
		}
		return post(sharded, "http://"+service+"/hooks/"+namespace+"/"+fn)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range work {
				if err := send(names[i]); err != nil {
					mu.Lock()
					if r.errors == 0 {
						fmt.Fprintf(os.Stderr, "bench-replicas: %s: first failed call (%s): %v\n", routing, names[i], err)
					}
					r.errors++
					mu.Unlock()
				}
			}
		})
	}
	for _, i := range order {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, gw := range gws {
		r.after = append(r.after, sum(gw.RuntimeStats()))
	}
	return r, nil
}

// countingTransport tells reached which host each request went to.
type countingTransport struct {
	next    http.RoundTripper
	reached func(host string)
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.reached(req.URL.Host)
	return t.next.RoundTrip(req)
}

func post(c hook.Doer, u string) error {
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(request))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)
	}
	return nil
}

func sum(stats map[string]lambda.PoolStats) lambda.PoolStats {
	var s lambda.PoolStats
	for _, v := range stats {
		s.Idle += v.Idle
		s.Busy += v.Busy
		s.Starts += v.Starts
		s.Evictions += v.Evictions
	}
	return s
}
