// Command bench-engine measures the engine on a real control plane: N parents of a
// test CRD, each with 3 ConfigMap children returned by an in-process hook whose status
// counts the children it is shown. Every row starts a fresh API server, runs the
// engine binary as a separate process until every parent reports its 3 children, then
// stops it and times the same writes (the parents, their children, one status write
// each) from a plain parallel client: that is the limit the engine is compared with.
// It prints one table: convergence, limit and their ratio, hook calls per parent, the
// engine's CPU time and peak RSS, and the API requests of one full resync of the
// converged state. -timeline adds, per row, where the wall time and the machine's
// CPU went, and the limit of the engine's own requests.
//
//	go run ./hack/bench-engine -engine bin/engine -n 1000,5000
//	go run ./hack/bench-engine -engine bin/engine -n 10000 -unrelated 0 -defaults-n 0 -resync-seconds 120
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"

	"github.com/metalambda/metalambda/hack/internal/procstat"
)

var gvr = schema.GroupVersionResource{Group: "bench.metalambda.dev", Version: "v1", Resource: "benchparents"}

// config is one benchmark invocation.
type config struct {
	engineBin     string
	upstream      bool // the binary is upstream Metacontroller: no Ready condition, no metalambda_* series
	sizes         []int
	engineArgs    []string
	defaultsN     int // also run this many parents with no engine flags (0: skip)
	unrelated     int // also run the first size with this many unrelated ConfigMaps (0: skip)
	resync        int
	clientWorkers int
	profileDir    string // heap profiles and RSS of each row's engine go here ("": none)
	profileSecs   int    // length of the CPU profile (0: one second per 150 parents)
	timeline      bool   // print where each row's wall time and CPU went
}

func main() {
	var cfg config
	flag.StringVar(&cfg.engineBin, "engine", "bin/engine", "engine binary to measure")
	flag.BoolVar(&cfg.upstream, "upstream", false, "the -engine binary is upstream Metacontroller: its controller is taken as running at its Starting event (it writes no Ready condition), and the resync's API requests are not counted (it serves no metalambda_* series)")
	sizes := flag.String("n", "1000,5000", "comma-separated parent counts, each run with -engine-args")
	engineArgs := flag.String("engine-args", "--client-go-qps=1000 --client-go-burst=2000 --workers=16", "engine flags of the -n runs, space-separated")
	flag.IntVar(&cfg.defaultsN, "defaults-n", 1000, "also run this many parents with no engine flags at all (0 skips)")
	flag.IntVar(&cfg.unrelated, "unrelated", 10000, "also run the first -n size with this many unrelated ConfigMaps in the cluster (0 skips)")
	flag.IntVar(&cfg.resync, "resync-seconds", 60, "resyncPeriodSeconds of the benchmark controller: longer than convergence, so that resyncs neither add hook calls to it nor wait behind it")
	flag.IntVar(&cfg.clientWorkers, "client-workers", 16, "goroutines of the plain client that measures the limit")
	flag.StringVar(&cfg.profileDir, "profile-dir", "", "serve the engine's pprof and save, per row, its heap profile and RSS when idle (controller ready, no parents), converged, and after the resync, and its CPU profile while it converges")
	flag.IntVar(&cfg.profileSecs, "profile-seconds", 0, "length of the CPU profile of -profile-dir, from the start of convergence (0: one second per 150 parents, at least 2)")
	flag.BoolVar(&cfg.timeline, "timeline", false, "print, per row, when the benchmark's last parent create was answered, when shares of the parents converged, the engine's API requests while converging, and the CPU seconds of the engine, the API server, etcd, the controller manager and the benchmark itself (its parent creates, watch and hook) while converging and while the limit ran; then time two more limits after the first: the engine's own requests (JSON ConfigMaps, two status writes per parent), and the first limit again")
	flag.Parse()
	cfg.engineArgs = strings.Fields(*engineArgs)
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench-engine: -n: %q is not a positive count\n", s)
			os.Exit(2)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

// scenario is one row: a fresh API server, the engine converging n parents, then the
// plain client doing the same writes.
type scenario struct {
	n         int
	unrelated int
	args      []string
}

type result struct {
	scenario
	converge, limit     time.Duration
	callsPerParent      float64
	cpu                 time.Duration
	rssMiB              float64
	resyncCalls         int64
	writes, gets, lists float64
	syncErrors          float64
	// Where the wall time and the machine's CPU went, for the -timeline lines.
	created       time.Duration      // the benchmark's last parent create answered
	quantiles     []time.Duration    // parents converged at timelineQuantiles
	convergeCPU   map[string]float64 // CPU seconds per process while converging
	limitCPU      map[string]float64 // CPU seconds per process while the limit ran
	convergeCalls map[string]float64 // the engine's API requests while converging, by verb and resource
	// engineLimit is the limit of the engine's own requests (-timeline): its
	// ConfigMaps as JSON with its labels, owner reference and annotation, and its two
	// status writes per parent; engineLimitCPU is the CPU while it ran.
	engineLimit    time.Duration
	engineLimitCPU map[string]float64
	// limitAgain is the limit measured once more after engineLimit (-timeline).
	limitAgain    time.Duration
	limitAgainCPU map[string]float64
}

// timelineQuantiles are the shares of parents converged that -timeline reports.
var timelineQuantiles = []float64{0.25, 0.5, 0.75, 0.9, 0.99, 1}

func run(cfg config) error {
	var scenarios []scenario
	for _, n := range cfg.sizes {
		scenarios = append(scenarios, scenario{n: n, args: cfg.engineArgs})
	}
	if cfg.unrelated > 0 {
		scenarios = append(scenarios, scenario{n: cfg.sizes[0], unrelated: cfg.unrelated, args: cfg.engineArgs})
	}
	if cfg.defaultsN > 0 {
		scenarios = append(scenarios, scenario{n: cfg.defaultsN})
	}
	var results []result
	for _, sc := range scenarios {
		r, err := measure(cfg, sc)
		if err != nil {
			return fmt.Errorf("with %d parents: %w", sc.n, err)
		}
		fmt.Fprintf(os.Stderr, "bench-engine: %d parents, %d unrelated, flags %q: converged in %.1fs, limit %.1fs\n", sc.n, sc.unrelated, strings.Join(sc.args, " "), r.converge.Seconds(), r.limit.Seconds())
		if cfg.timeline {
			printTimeline(r)
		}
		results = append(results, r)
	}
	fmt.Printf("engine %s; limit: a plain client with %d goroutines and no client-side rate limit\n", cfg.engineBin, cfg.clientWorkers)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "parents\tchildren\tunrelated CMs\tengine flags\tconverge (s)\tlimit (s)\tratio\thook calls/parent\tengine CPU (s)\tpeak RSS (MiB)\tresync hook calls\tresync writes\tresync GETs\tresync LISTs\tsync errors\t")
	for _, r := range results {
		flags := strings.Join(r.args, " ")
		if flags == "" {
			flags = "(none)"
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.0f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			r.n, 3*r.n, r.unrelated, flags, r.converge.Seconds(), r.limit.Seconds(), r.converge.Seconds()/r.limit.Seconds(),
			r.callsPerParent, r.cpu.Seconds(), r.rssMiB, r.resyncCalls, r.writes, r.gets, r.lists, r.syncErrors)
	}
	return w.Flush()
}

// benchHook answers like a controller whose status depends on its children: three
// ConfigMaps, and a status counting the ConfigMaps it was shown.
func benchHook(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Parent   map[string]any            `json:"parent"`
			Children map[string]map[string]any `json:"children"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		name := req.Parent["metadata"].(map[string]any)["name"].(string)
		var children []any
		for i := range 3 {
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, i)},
				"data":     map[string]any{"index": strconv.Itoa(i)},
			})
		}
		status := map[string]any{"children": len(req.Children["ConfigMap.v1"])}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "children": children})
	})
}

func measure(cfg config, sc scenario) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	opts := cluster.Defaults()
	opts.EtcdNoFsync, opts.Components = true, []cluster.Component{cluster.ControllerManager}
	cluster, err := cluster.Start(ctx, opts)
	if err != nil {
		return result{}, err
	}
	defer cluster.Stop()
	if err := installCRDs(ctx, cluster); err != nil {
		return result{}, err
	}
	b := &bench{cfg: cfg, kube: kubernetes.NewForConfigOrDie(unlimited(cluster.Config)), dyn: dynamic.NewForConfigOrDie(unlimited(cluster.Config))}
	if sc.unrelated > 0 {
		if err := b.unrelatedConfigMaps(ctx, sc.unrelated); err != nil {
			return result{}, err
		}
	}
	r, err := b.engine(ctx, cluster, sc)
	if err != nil {
		return result{}, err
	}
	// The engine is stopped: the plain client has the API server to itself.
	cpu := processCPU()
	r.limit, err = b.limit(ctx, sc.n, "limit")
	r.limitCPU = cpuSince(cpu)
	if err != nil || !cfg.timeline {
		return r, err
	}
	cpu = processCPU()
	if r.engineLimit, err = b.engineLimit(ctx, sc.n); err != nil {
		return r, err
	}
	r.engineLimitCPU = cpuSince(cpu)
	// The limit once more, on an API server that holds the objects of every phase
	// before it: how much a phase slows down by coming later.
	cpu = processCPU()
	r.limitAgain, err = b.limit(ctx, sc.n, "limit-again")
	r.limitAgainCPU = cpuSince(cpu)
	return r, err
}

// unlimited is cfg without a client-side rate limit.
func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

type bench struct {
	cfg  config
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

// parallel runs do(i) for i in [0, n) on the client's goroutines.
func (b *bench) parallel(ctx context.Context, n int, do func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.cfg.clientWorkers)
	for i := range n {
		g.Go(func() error { return do(ctx, i) })
	}
	return g.Wait()
}

func (b *bench) namespace(ctx context.Context, name string) error {
	_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

func (b *bench) unrelatedConfigMaps(ctx context.Context, n int) error {
	if err := b.namespace(ctx, "unrelated"); err != nil {
		return err
	}
	return b.parallel(ctx, n, func(ctx context.Context, i int) error {
		_, err := b.kube.CoreV1().ConfigMaps("unrelated").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%05d", i), Labels: map[string]string{"app": "unrelated"}},
			Data:       map[string]string{"value": strings.Repeat("x", 256)},
		}, metav1.CreateOptions{})
		return err
	})
}

func parentObject(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bench.metalambda.dev/v1", "kind": "BenchParent",
		"metadata": map[string]any{"name": fmt.Sprintf("p%05d", i)}, "spec": map[string]any{"i": int64(i)},
	}}
}

// limit times the engine's writes issued by a plain parallel client: per parent, the
// parent, its three ConfigMaps and one status write.
func (b *bench) limit(ctx context.Context, n int, ns string) (time.Duration, error) {
	if err := b.namespace(ctx, ns); err != nil {
		return 0, err
	}
	start := time.Now()
	err := b.parallel(ctx, n, func(ctx context.Context, i int) error {
		p, err := b.dyn.Resource(gvr).Namespace(ns).Create(ctx, parentObject(i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		for c := range 3 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", p.GetName(), c), Labels: map[string]string{"controller-uid": string(p.GetUID())},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: p.GetAPIVersion(), Kind: p.GetKind(), Name: p.GetName(), UID: p.GetUID()}},
			}, Data: map[string]string{"index": strconv.Itoa(c)}}
			if _, err := b.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		p.Object["status"] = map[string]any{"children": int64(3), "observedGeneration": p.GetGeneration()}
		_, err = b.dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	return time.Since(start), err
}

// engineLimit times, from the same plain client, the writes the engine sends: per
// parent, the parent (the benchmark's), three ConfigMaps as the engine creates them
// (JSON, not the typed client's protobuf; its controller-uid label, controller
// reference, desired-hash annotation and field manager) and two status writes: the
// one from the hook's answer that did not see the children yet (upstream writes it
// too), then the one from the answer that counts them.
func (b *bench) engineLimit(ctx context.Context, n int) (time.Duration, error) {
	ns := "limit-engine"
	if err := b.namespace(ctx, ns); err != nil {
		return 0, err
	}
	cms := b.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	parents := b.dyn.Resource(gvr).Namespace(ns)
	opts := metav1.CreateOptions{FieldManager: "metalambda"}
	start := time.Now()
	err := b.parallel(ctx, n, func(ctx context.Context, i int) error {
		p, err := parents.Create(ctx, parentObject(i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		status := func(children int64) error {
			p.Object["status"] = map[string]any{"children": children, "observedGeneration": p.GetGeneration()}
			p, err = parents.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "metalambda"})
			return err
		}
		for c := range 3 {
			cm := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{
					"name": fmt.Sprintf("%s-%d", p.GetName(), c), "namespace": ns,
					"labels":      map[string]any{"controller-uid": string(p.GetUID())},
					"annotations": map[string]any{"metalambda.dev/desired-hash": fmt.Sprintf("%024x", i*3+c)},
					"ownerReferences": []any{map[string]any{
						"apiVersion": p.GetAPIVersion(), "kind": p.GetKind(), "name": p.GetName(), "uid": string(p.GetUID()),
						"controller": true, "blockOwnerDeletion": true,
					}},
				},
				"data": map[string]any{"index": strconv.Itoa(c)},
			}}
			if _, err := cms.Create(ctx, cm, opts); err != nil {
				return err
			}
		}
		if err := status(0); err != nil {
			return err
		}
		return status(3)
	})
	return time.Since(start), err
}

// engine runs the engine against n parents: convergence, one full resync, memory.
func (b *bench) engine(ctx context.Context, cluster *cluster.Cluster, sc scenario) (result, error) {
	r := result{scenario: sc}
	var calls atomic.Int64
	hook := httptest.NewServer(benchHook(&calls))
	defer hook.Close()
	metricsAddr, err := freeAddr()
	if err != nil {
		return r, err
	}
	args := append([]string{"--kubeconfig", cluster.KubeconfigPath, "--metrics-address", metricsAddr, "--health-probe-bind-address", "0"}, sc.args...)
	prof := profiler{dir: b.cfg.profileDir, seconds: b.cfg.profileSecs, row: fmt.Sprintf("n%d-unrelated%d-%s", sc.n, sc.unrelated, rowFlags(sc.args))}
	if prof.dir != "" {
		if prof.addr, err = freeAddr(); err != nil {
			return r, err
		}
		args = append(args, "--pprof-address", prof.addr)
	}
	engine := exec.Command(b.cfg.engineBin, args...)
	logFile, err := os.Create(filepath.Join(cluster.DataDir, "logs", "engine.log"))
	if err != nil {
		return r, err
	}
	defer logFile.Close()
	engine.Stdout, engine.Stderr = logFile, logFile
	engine.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := engine.Start(); err != nil {
		return r, err
	}
	defer func() { _ = engine.Process.Signal(syscall.SIGTERM); _ = engine.Wait() }()

	ns := "bench"
	if err := b.namespace(ctx, ns); err != nil {
		return r, err
	}
	if err := b.controller(ctx, hook.URL, b.cfg.resync); err != nil {
		return r, err
	}
	converged := &convergence{}
	done, stop, err := b.watchConverged(ctx, ns, sc.n, converged)
	if err != nil {
		return r, err
	}
	defer stop()

	prof.save("idle", engine.Process.Pid)
	cpuProfile := prof.cpu(sc.n)
	defer cpuProfile()
	start := time.Now()
	converged.start(start)
	machineCPU := processCPU()
	callsStart, err := scrape(metricsAddr)
	if err != nil {
		return r, err
	}
	cpuStart, _ := procstat.CPU(engine.Process.Pid)
	if err := b.parallel(ctx, sc.n, func(ctx context.Context, i int) error {
		_, err := b.dyn.Resource(gvr).Namespace(ns).Create(ctx, parentObject(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return r, err
	}
	r.created = time.Since(start)
	select {
	case <-done:
	case <-ctx.Done():
		return r, fmt.Errorf("not converged: %w", ctx.Err())
	}
	r.converge = time.Since(start)
	cpuEnd, _ := procstat.CPU(engine.Process.Pid)
	r.cpu = cpuEnd - cpuStart
	r.convergeCPU = cpuSince(machineCPU)
	r.quantiles = converged.quantiles(timelineQuantiles)
	if calls, err := scrape(metricsAddr); err == nil {
		r.convergeCalls = map[string]float64{}
		for key, v := range calls {
			if d := v - callsStart[key]; key.name == "metalambda_engine_api_requests_total" && d != 0 {
				r.convergeCalls[key.verb+" "+key.resource] += d
			}
		}
	}
	prof.save("converged", engine.Process.Pid)
	// Syncs that follow convergence (the engine observing its own last writes) count too.
	time.Sleep(2 * time.Second)
	r.callsPerParent = float64(calls.Load()) / float64(sc.n)

	// One full resync: every parent's hook is called once more.
	before, err := scrape(metricsAddr)
	if err != nil {
		return r, err
	}
	base := calls.Load()
	if err := kubetest.Wait(ctx, time.Duration(b.cfg.resync)*3*time.Second, func(context.Context) (bool, error) {
		return calls.Load() >= base+int64(sc.n), nil
	}); err != nil {
		return r, fmt.Errorf("no full resync: %w", err)
	}
	time.Sleep(time.Second)
	after, err := scrape(metricsAddr)
	if err != nil {
		return r, err
	}
	r.resyncCalls = calls.Load() - base
	for key, v := range after {
		d := v - before[key]
		switch verb := key.verb; {
		case key.name == "metalambda_engine_syncs_total":
		case key.resource == "events" || key.resource == "discovery" || d == 0:
		case verb == "get":
			r.gets += d
		case verb == "list" || verb == "watch":
			r.lists += d
		default:
			r.writes += d
		}
	}
	for key, v := range after {
		if key.name == "metalambda_engine_syncs_total" && key.result == "error" {
			r.syncErrors += v
		}
	}
	r.rssMiB = peakRSS(engine.Process.Pid)
	prof.save("resynced", engine.Process.Pid)
	return r, nil
}

// profiler saves the engine's heap profile and RSS at named moments of a row.
type profiler struct {
	dir, row, addr string
	seconds        int // length of the CPU profile (0: from the parent count)
}

func (p profiler) save(moment string, pid int) {
	if p.dir == "" {
		return
	}
	base := filepath.Join(p.dir, p.row+"-"+moment)
	rss := fmt.Sprintf("RSS %.1f MiB, peak %.1f MiB\n", statusMiB(pid, "VmRSS:"), statusMiB(pid, "VmHWM:"))
	if rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		rss += string(rollup) // anonymous memory and mapped files apart
	}
	if err := os.WriteFile(base+".rss", []byte(rss), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine: profile:", err)
	}
	for suffix, query := range map[string]string{".heap": "", ".heap.txt": "?debug=1"} {
		if err := fetch("http://"+p.addr+"/debug/pprof/heap"+query, base+suffix); err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine: profile:", err)
		}
	}
}

// cpu records the engine's CPU profile from the start of convergence, for p.seconds or
// else about as long as n parents take to converge here (one second per 150); the
// returned function waits for it to be saved.
func (p profiler) cpu(n int) (wait func()) {
	if p.dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		seconds := p.seconds
		if seconds <= 0 {
			seconds = max(n/150, 2)
		}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addr, seconds)
		if err := fetch(url, filepath.Join(p.dir, p.row+"-converging.cpu")); err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine: profile:", err)
		}
	}()
	return func() { <-done }
}

func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rowFlags names a row's engine flags in a file name.
func rowFlags(args []string) string {
	if len(args) == 0 {
		return "defaults"
	}
	return "flags"
}

func (b *bench) controller(ctx context.Context, hookURL string, resync int) error {
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{
			"generateSelector":    true,
			"resyncPeriodSeconds": int64(resync),
			"parentResource":      map[string]any{"apiVersion": "bench.metalambda.dev/v1", "resource": "benchparents"},
			"childResources":      []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":               map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hookURL}}},
		},
	}}
	ccs := b.dyn.Resource(schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"})
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Time convergence from a running controller, not from the engine's start.
	if b.cfg.upstream {
		return b.started(ctx, "bench")
	}
	return kubetest.Wait(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		obj, err := ccs.Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, fmt.Errorf("controller not ready")
	})
}

// started waits for upstream's Starting event on the CompositeController name, which
// it records as the controller starts (a cluster-scoped object's events go to
// namespace default).
func (b *bench) started(ctx context.Context, name string) error {
	return kubetest.Wait(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := b.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "Starting" {
				return true, nil
			}
		}
		return false, fmt.Errorf("no Starting event")
	})
}

// watchConverged closes done once n parents report status.children == 3 (the hook
// counts the children it was shown, so every child exists too).
func (b *bench) watchConverged(ctx context.Context, ns string, n int, times *convergence) (done <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{})
	var mu sync.Mutex
	ready := map[string]bool{}
	inf := dynamicinformer.NewFilteredDynamicInformer(b.dyn, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	check := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		c, _, _ := unstructured.NestedInt64(u.Object, "status", "children")
		mu.Lock()
		defer mu.Unlock()
		if c == 3 && !ready[u.GetName()] {
			ready[u.GetName()] = true
			times.add()
			if len(ready) == n {
				close(ch)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		return nil, nil, err
	}
	ictx, cancel := context.WithCancel(ctx)
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, nil, ctx.Err()
	}
	return ch, cancel, nil
}

type series struct{ name, verb, resource, result string }

// scrape sums metalambda_engine_api_requests_total by verb and resource, and
// metalambda_engine_syncs_total by result.
func scrape(addr string) (map[series]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[series]float64{}
	for line := range strings.Lines(string(body)) {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "metalambda_engine_api_requests_total" && name != "metalambda_engine_syncs_total") {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		out[series{name: name, verb: labelOf(labels, "verb"), resource: labelOf(labels, "resource"), result: labelOf(labels, "result")}] += v
	}
	return out, nil
}

func labelOf(labels, name string) string {
	for part := range strings.SplitSeq(labels, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func peakRSS(pid int) float64 { return statusMiB(pid, "VmHWM:") }

// statusMiB reads a memory figure (kB) of /proc/pid/status in MiB.
func statusMiB(pid int, key string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func installCRDs(ctx context.Context, cluster *cluster.Cluster) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	preserve := true
	all = append(all, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "benchparents.bench.metalambda.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "bench.metalambda.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "benchparents", Kind: "BenchParent", ListKind: "BenchParentList", Singular: "benchparent"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve}, "status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	})
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	return crds.Install(ctx, client, all...)
}

// convergence records when each parent was seen converged, from the start of a row.
type convergence struct {
	mu    sync.Mutex
	began time.Time
	at    []time.Duration
}

func (c *convergence) start(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.began = t
}

func (c *convergence) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Since(c.began))
}

// quantiles returns when each share q of the parents had converged (events arrive in
// order, so at is sorted).
func (c *convergence) quantiles(qs []float64) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		if k := int(q*float64(len(c.at))+0.5) - 1; k >= 0 && k < len(c.at) {
			out[i] = c.at[k]
		}
	}
	return out
}

func printTimeline(r result) {
	var b strings.Builder
	fmt.Fprintf(&b, "bench-engine: timeline: parents created by %.2fs; converged", r.created.Seconds())
	for i, q := range timelineQuantiles {
		fmt.Fprintf(&b, " %g%% %.2fs", q*100, r.quantiles[i].Seconds())
	}
	fmt.Fprintf(os.Stderr, "%s\n", b.String())
	calls := slices.Sorted(maps.Keys(r.convergeCalls))
	b.Reset()
	for _, c := range calls {
		fmt.Fprintf(&b, "; %s %.0f", c, r.convergeCalls[c])
	}
	fmt.Fprintf(os.Stderr, "bench-engine: timeline: the engine's API requests while converging%s\n", b.String())
	for _, phase := range []struct {
		name string
		cpu  map[string]float64
		wall time.Duration
	}{{"converging", r.convergeCPU, r.converge}, {"limit", r.limitCPU, r.limit}, {"limit of the engine's requests", r.engineLimitCPU, r.engineLimit}, {"limit again", r.limitAgainCPU, r.limitAgain}} {
		b.Reset()
		var total float64
		for _, name := range cpuProcesses {
			total += phase.cpu[name]
			fmt.Fprintf(&b, " %s %.2f", name, phase.cpu[name])
		}
		if phase.wall != r.converge {
			fmt.Fprintf(&b, "; convergence over it %.2f", r.converge.Seconds()/phase.wall.Seconds())
		}
		fmt.Fprintf(os.Stderr, "bench-engine: timeline: %s: %.2fs wall; CPU seconds:%s; total %.2f (%.2f cores)\n", phase.name, phase.wall.Seconds(), b.String(), total, total/phase.wall.Seconds())
	}
}

// cpuProcesses are the processes whose CPU -timeline reports: the benchmark's
// children by command name, and the benchmark itself.
var cpuProcesses = []string{"engine", "kube-apiserver", "etcd", "kube-controller-manager", "bench"}

// processCPU reads the CPU time of the benchmark and of each of its child processes,
// keyed by cpuProcesses' names (an engine binary of another name counts as
// "engine").
func processCPU() map[string]time.Duration {
	own, _ := procstat.CPU(os.Getpid())
	out := map[string]time.Duration{"bench": own}
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...".
		comm, rest, _ := strings.Cut(string(data), ") ")
		_, comm, _ = strings.Cut(comm, "(")
		if f := strings.Fields(rest); len(f) < 2 || f[1] != self {
			continue
		}
		name := "engine"
		for _, known := range cpuProcesses {
			if strings.HasPrefix(known, comm) { // comm is cut to 15 bytes
				name = known
			}
		}
		t, _ := procstat.CPU(pid)
		out[name] += t
	}
	return out
}

// cpuSince is the CPU seconds per process spent since before.
func cpuSince(before map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for name, t := range processCPU() {
		out[name] = (t - before[name]).Seconds()
	}
	return out
}
