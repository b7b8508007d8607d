// Command bench-density measures what registered Functions cost a gateway: n
// Functions (a third each of JavaScript, Python and Jsonnet, trivial sync hooks)
// are registered on an in-process gateway with a real API server, then each is
// called (a cold call: its worker starts), called again (warm), left idle past the
// worker idle timeout, and called again. It prints the proportional memory (PSS) of
// the gateway and all its workers per Function in each state, cold and warm call
// latency per runtime, the workers started and stopped, the process's own RSS,
// and the memory of a warm worker's processes (the worker and bubblewrap's two)
// by runtime: Private_Dirty, Pss_Anon, Pss_File and Pss, right after the warm
// pass and again a few seconds later (-warm-calls calls each Function more than
// once in that pass, as a busy worker's heap grows).
//
//	go run ./hack/bench-density -n 1000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metalambda/metalambda/hack/internal/benchkit"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/kubetest"
)

var request = []byte(`{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"density"},"spec":{}},"children":{"ConfigMap.v1":{}},"related":{},"finalizing":false}`)

const namespace = "density"

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func main() {
	// A sandbox starts this executable again as its launcher or a script worker.
	lambda.ServeWorker()
	n := flag.Int("n", 1000, "Functions to register, a third of each runtime")
	idleTimeout := flag.Duration("idle-timeout", 2*time.Minute, "the gateway's --worker-idle-timeout: longer than the cold pass takes, so that the warm pass finds the workers it started")
	budget := flag.String("budget", "2Gi", "the gateway's --worker-memory-budget (0: none)")
	executables.RegisterFlags(flag.CommandLine)
	clients := flag.Int("clients", 16, "concurrent callers of the warm calls (cold calls are made one at a time, so that each measures a start alone)")
	flag.StringVar(&pythonZygote, "python-zygote", lambda.DefaultPythonZygote, "the gateway's --python-zygote (auto or off)")
	flag.StringVar(&scriptZygote, "script-zygote", lambda.DefaultScriptZygote, "the gateway's --script-zygote (auto or off)")
	flag.IntVar(&spares, "spares", lambda.DefaultWorkerSpares, "the gateway's --worker-spares (negative: none)")
	flag.IntVar(&warmCalls, "warm-calls", 1, "calls of each Function in the warm pass: a worker's memory after many calls (a Go worker's heap grows between collections) rather than after one")
	flag.StringVar(&memProfile, "memprofile", "", "a directory to write this process's heap profile into at each state (STATE.pprof), for go tool pprof")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "a directory to write a CPU profile of this process (the gateway and the callers) into for each pass (PASS.cpu.pprof), for go tool pprof")
	flag.StringVar(&callsLog, "calls-log", "", "a file to write every call into, one line each: the pass, the runtime, when it ended in seconds of CLOCK_MONOTONIC (the clock of `perf record -k CLOCK_MONOTONIC`, to find what ran during a slow call) and its latency in milliseconds")
	flag.DurationVar(&coldInterval, "cold-interval", 0, "pause between two cold calls: 0 calls back to back, which drains the spares faster than they refill; a pause longer than a worker's start shows cold starts as they come when they are sporadic")
	flag.Parse()
	if memProfile != "" {
		// A sample every 4 KiB rather than 512: the gateway's memory per
		// Function is a few KiB of many kinds, which the default rate
		// would show as a few objects of 512 KiB.
		runtime.MemProfileRate = 4096
	}
	q, err := resource.ParseQuantity(*budget)
	if err == nil {
		err = run(*n, *idleTimeout, q.Value(), *clients)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-density:", err)
		os.Exit(1)
	}
}

// The gateway's spares and launcher, and the pause between cold calls.
var (
	executables  benchkit.Executables
	spares       int
	pythonZygote string
	scriptZygote string
	coldInterval time.Duration
	warmCalls    int
	memProfile   string
	callsLog     string
)

// restAfterWarm is how long the workers rest after the warm pass before their
// memory is read again: longer than a Go worker's wait before it gives back its
// free memory (one second), far shorter than the idle timeout.
const restAfterWarm = 3 * time.Second

// phase is one pass over every Function.
type phase struct {
	name      string
	latencies map[string][]time.Duration // by runtime
	errors    int
	pss       int64 // after the pass
	cpu       cpuUse
	// starts and evictions are the workers started, and stopped for the
	// memory budget, during the pass (all runtimes).
	starts, evictions uint64
}

func run(n int, idleTimeout time.Duration, budget int64, clients int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cluster, err := benchkit.StartControlPlane(ctx)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	gwOpts := gateway.Defaults()
	gwOpts.MaxFunctionsPerNamespace = n
	opts := &gwOpts.Runtime
	opts.WorkerIdleTimeout, opts.MemoryBudget, opts.WorkerSpares = idleTimeout, lambda.NewMemoryBudget(budget), spares
	opts.PythonZygote = pythonZygote
	opts.ScriptZygote = scriptZygote
	sb, launcher, err := executables.Sandbox()
	if err != nil {
		return err
	}
	if sb != nil {
		defer sb.Close()
		opts.Sandbox = sb
	}
	base, gw, stop, err := benchkit.StartGateway(cluster, gwOpts)
	if err != nil {
		return err
	}
	defer stop()
	stats := gw.RuntimeStats
	baseline := pss()
	var gm goMem
	gm.record("no Function")

	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	if _, err := dyn.Resource(namespacesGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	names := make([]string, n)
	rt := make([]string, n)
	start := time.Now()
	for i := range n {
		rt[i] = benchkit.Runtimes[i%len(benchkit.Runtimes)]
		names[i] = fmt.Sprintf("%s-%04d", rt[i], i)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
			"metadata": map[string]any{"name": names[i]}, "spec": map[string]any{"runtime": rt[i], "source": benchkit.Hooks[rt[i]]},
		}}
		if _, err := dyn.Resource(gateway.FunctionsGVR).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := kubetest.Wait(ctx, 20*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(gateway.FunctionsGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, f := range list.Items {
			if readyTrue(f) {
				ready++
			}
		}
		return ready == n, nil
	}); err != nil {
		return fmt.Errorf("the Functions never all became Ready: %w", err)
	}
	registered := time.Since(start)
	time.Sleep(2 * time.Second) // the check workers' exits
	registeredPSS := pss()
	gm.record("registered")

	var calls *bufio.Writer
	if callsLog != "" {
		f, err := os.Create(callsLog)
		if err != nil {
			return err
		}
		defer f.Close()
		calls = bufio.NewWriter(f)
		defer calls.Flush()
	}
	call := func(name string, clients, repeat int, pause time.Duration) *phase {
		p := &phase{name: name, latencies: map[string][]time.Duration{}}
		stopProfile := startCPUProfile(name)
		before := stats()
		mark := markCPU()
		var mu sync.Mutex
		work := make(chan int)
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					t := time.Now()
					err := post(base + "/hooks/" + namespace + "/" + names[i])
					d := time.Since(t)
					ended := monotonicSeconds()
					mu.Lock()
					if calls != nil {
						fmt.Fprintf(calls, "%s\t%s\t%.6f\t%.3f\n", name, rt[i], ended, float64(d)/float64(time.Millisecond))
					}
					if err != nil {
						p.errors++
					} else {
						p.latencies[rt[i]] = append(p.latencies[rt[i]], d)
					}
					mu.Unlock()
				}
			}()
		}
		for range repeat {
			for i := range n {
				work <- i
				time.Sleep(pause)
			}
		}
		close(work)
		wg.Wait()
		p.cpu = mark.since()
		for r, s := range stats() {
			p.starts += s.Starts - before[r].Starts
			p.evictions += s.Evictions - before[r].Evictions
		}
		stopProfile()
		p.pss = pss()
		gm.record("after the " + name)
		return p
	}
	cold := call("first call (cold)", 1, 1, coldInterval)
	coldView := readBudgetView()
	warm := call("second call (warm)", clients, warmCalls, 0)
	warmSplit := splitWorkers()
	time.Sleep(restAfterWarm) // workers idle for a moment, still warm
	restedPSS, restedSplit := pss(), splitWorkers()
	gm.record("rested")
	time.Sleep(idleTimeout + 3*time.Second) // past the idle timeout and a sweep
	idlePSS := pss()
	gm.record("idle")
	again := call("after idle (cold)", 1, 1, coldInterval)
	after := stats()

	fmt.Printf("\n%d Functions (%s), %d callers, %d warm calls each, worker idle timeout %s, memory budget %s, %d spares, %s between cold calls, Python zygote %s, script zygote %s, workers from %s; registering took %s\n",
		n, strings.Join(benchkit.Runtimes, ", "), clients, warmCalls, idleTimeout, resource.NewQuantity(budget, resource.BinarySI), spares, coldInterval, pythonZygote, scriptZygote, launcher, registered.Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "state\tPSS of the gateway and its workers (MiB)\tper Function (MiB)\t")
	row := func(state string, v int64) {
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t\n", state, mib(v), mib(v-baseline)/float64(n))
	}
	row("no Function", baseline)
	row("registered", registeredPSS)
	row("after the first calls", cold.pss)
	row("after the second calls", warm.pss)
	row(fmt.Sprintf("%s after them", restAfterWarm), restedPSS)
	row("idle past the timeout", idlePSS)
	row("after calls again", again.pss)
	tw.Flush()
	fmt.Println()
	fmt.Fprintln(tw, "calls\truntime\tp50 (ms)\tp99 (ms)\tmax (ms)\terrors\t")
	for _, p := range []*phase{cold, warm, again} {
		for _, r := range benchkit.Runtimes {
			l := p.latencies[r]
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%d\t\n", p.name, r, ms(pct(l, 50)), ms(pct(l, 99)), ms(pct(l, 100)), p.errors)
		}
	}
	tw.Flush()
	fmt.Println()
	printCPU(os.Stdout, []*phase{cold, warm, again})
	fmt.Println()
	fmt.Fprintln(tw, "runtime\tworkers started\tof which found no spare\tstopped for the budget\tstopped idle\t")
	for _, r := range benchkit.Runtimes {
		s := after[r]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", r, s.Starts, s.SpareMisses, s.Evictions, s.Reaps)
	}
	tw.Flush()
	fmt.Println()
	coldView.print(os.Stdout, "after the first calls")
	fmt.Println()
	warmSplit.print(os.Stdout, "after the second calls")
	fmt.Println()
	restedSplit.print(os.Stdout, fmt.Sprintf("%s after the second calls", restAfterWarm))
	fmt.Println()
	gm.print(os.Stdout)
	fmt.Printf("\nthis process's own RSS (the gateway and the benchmark): %.1f MiB; workers' memory at the budget's last look: %.1f MiB\n",
		mib(rss(os.Getpid())), mib(opts.MemoryBudget.Used()))
	return nil
}

func readyTrue(f unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(f.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func post(url string) error { return benchkit.Post(url, request) }

// monotonicSeconds reads CLOCK_MONOTONIC, which perf can stamp its samples with.
func monotonicSeconds() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// pss is the proportional memory of this process and its workers with their
// sandboxes' processes (the trees below it that hold a worker of this gateway),
// not of the control plane it also started.
func pss() int64 {
	total := smapsField(os.Getpid(), "Pss:")
	for _, tree := range workerTrees() {
		for _, pid := range tree {
			total += smapsField(pid, "Pss:")
		}
	}
	return total
}

// workerTrees are the trees of processes below this one that hold a worker of
// its gateway: not the control plane's.
func workerTrees() [][]int {
	self := os.Getpid()
	mark := "gateway=" + strconv.Itoa(self)
	var out [][]int
	for _, child := range sandbox.Children(self) {
		tree := append([]int{child}, lambda.Descendants(child)...)
		if slices.ContainsFunc(tree, func(pid int) bool {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return strings.Contains(string(cmdline), mark)
		}) {
			out = append(out, tree)
		}
	}
	return out
}

func rss(pid int) int64 { return smapsField(pid, "Rss:") }

// smapsField reads a field of /proc/PID/smaps_rollup, in bytes.
func smapsField(pid int, field string) int64 {
	return smapsFields(pid)[field]
}

// smapsFields reads the fields of /proc/PID/smaps_rollup that are sizes, in
// bytes, by name with its colon.
func smapsFields(pid int) map[string]int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = kb << 10
		}
	}
	return out
}

func pct(l []time.Duration, p int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(b int64) float64        { return float64(b) / (1 << 20) }
