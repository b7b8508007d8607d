// Command bench-gateway measures hook calls through the gateway: for a trivial sync
// hook (echo a ConfigMap per request) in each runtime, requests per second and p50/p99
// latency through /hooks/... with concurrent clients, side by side with a seed-style
// standalone Python http.server hook, the way Metacontroller hooks are usually written.
// Three reference rows bound what a runtime can reach: the same hook as a Go builtin
// (the gateway's own cost), net/http answering a constant (the machine's limit
// with this load generator), and that answer after a pipe round trip through a cat
// process (the least a worker in a process of its own costs). The load generator (wrk, or this executable started
// again with -load) runs in a process of its own; CPU per request is counted for
// the server's processes (this process, which hosts the gateway, and the gateway's
// workers; or the seed's process) and for the load generator, apart. The gateway
// starts its workers from the executables make build puts in bin/, as a deployed
// gateway does (-worker, -workers-dir, -launcher), or from this executable when
// they are missing.
//
//	go run ./hack/bench-gateway -duration 5s -clients 16 -rounds 3
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/metalambda/metalambda/hack/internal/benchkit"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gcpercent"
	"github.com/metalambda/metalambda/internal/kubetest"

	"github.com/metalambda/metalambda/hack/internal/procstat"
)

var functions = []struct{ name, runtime, source string }{
	{"javascript", "javascript", `function sync(request) {
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}]};
}`},
	{"python", "python", `def sync(request):
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": request["parent"]["metadata"]["name"]}, "data": {"hello": "world"}}]}
`},
	{"jsonnet", "jsonnet", `function(request) {
  children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}],
}`},
	{"builtin", "builtin", "echo"},
}

// echo is the same hook as a Go builtin: the gateway's own cost per call, with the
// least a runtime can add.
func echo(_ context.Context, request json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Parent struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"parent"`
	}
	if err := json.Unmarshal(request, &req); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"children": []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": req.Parent.Metadata.Name}, "data": map[string]any{"hello": "world"},
	}}})
}

// seedServer is a hook written the way Metacontroller's examples write them.
const seedServer = `
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Controller(BaseHTTPRequestHandler):
    def sync(self, parent, children):
        return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": parent["metadata"]["name"]}, "data": {"hello": "world"}}]}

    def do_POST(self):
        observed = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        desired = self.sync(observed["parent"], observed["children"])
        body = json.dumps(desired).encode()
        self.send_response(200)
        self.send_header("Content-type", "application/json")
        self.send_header("Content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Controller).serve_forever()
`

var request = []byte(`{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"default"},"spec":{}},"children":{"ConfigMap.v1":{}},"related":{},"finalizing":false}`)

func main() {
	// A sandbox starts this executable again as its launcher or a script worker.
	lambda.ServeWorker()
	duration := flag.Duration("duration", 5*time.Second, "load per target")
	clients := flag.Int("clients", 16, "concurrent clients")
	loader := flag.String("loader", "auto", "load generator: go (this executable in a process of its own), wrk, or auto (wrk when installed)")
	loadURL := flag.String(loadFlag, "", "be the Go load generator: post to this URL for -duration with -clients, print the summary as JSON (the benchmark starts itself so)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	gcPercent := flag.Int("gc-percent", gateway.DefaultGCPercent, "garbage-collection target of the in-process gateway, as cmd/gateway sets it (GOGC wins)")
	flag.IntVar(&rounds, "rounds", 3, "rounds over all targets; the table shows each target's median")
	flag.IntVar(&pythonWorkers, "python-workers", 0, "warm Python workers per function (0: the gateway's default)")
	only := flag.String("targets", "", "comma-separated targets to measure (javascript,python,jsonnet,builtin,seed,ceiling,pipe); default all")
	executables.RegisterFlags(flag.CommandLine)
	flag.Parse()
	if *loadURL != "" {
		if err := serveLoad(*loadURL, *duration, *clients); err != nil {
			fmt.Fprintln(os.Stderr, "bench-gateway load:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-gateway:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *loader == "auto" {
		*loader = "go"
		if _, err := exec.LookPath("wrk"); err == nil {
			*loader = "wrk"
		}
	}
	if *only != "" {
		selected = map[string]bool{}
		for _, t := range strings.Split(*only, ",") {
			selected[strings.TrimSpace(t)] = true
		}
	}
	gcpercent.Set(*gcPercent)
	if err := run(*duration, *clients, *loader); err != nil {
		fmt.Fprintln(os.Stderr, "bench-gateway:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

var (
	pythonWorkers int
	executables   benchkit.Executables
	rounds        int
	seedPID       int
)

// selected names the targets to measure; nil means all.
var selected map[string]bool

func want(target string) bool { return selected == nil || selected[target] }

type result struct {
	name          string
	requests      int
	errors        int
	rps           float64
	p50, p99, max time.Duration
	// serverCPU and loaderCPU are CPU time per request of the server's processes
	// and of the load generator.
	serverCPU, loaderCPU time.Duration
	// workersCPU is the part of serverCPU that the gateway's workers used; -1
	// for a server without workers.
	workersCPU time.Duration
}

func run(duration time.Duration, clients int, loader string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cluster, err := benchkit.StartControlPlane(ctx)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	opts := gateway.Defaults()
	opts.Runtime.PythonPoolSize, opts.Runtime.Builtins = pythonWorkers, lambda.Builtins{"echo": echo}
	sb, workers, err := executables.Sandbox()
	if err != nil {
		return err
	}
	if sb != nil {
		defer sb.Close()
		opts.Runtime.Sandbox = sb
	}
	base, _, stop, err := benchkit.StartGateway(cluster, opts)
	if err != nil {
		return err
	}
	defer stop()
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	for _, f := range functions {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
			"metadata": map[string]any{"name": f.name}, "spec": map[string]any{"runtime": f.runtime, "source": f.source},
		}}
		if _, err := dyn.Resource(gateway.FunctionsGVR).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
		url := base + "/hooks/default/" + f.name
		if err := kubetest.Wait(ctx, 30*time.Second, func(context.Context) (bool, error) { return post(url) == nil, post(url) }); err != nil {
			return fmt.Errorf("%s never answered: %w", f.name, err)
		}
	}
	seedURL, stopSeed, err := startSeed(cluster.DataDir)
	if err != nil {
		return err
	}
	defer stopSeed()

	ceilingURL, stopCeiling, err := startCeiling()
	if err != nil {
		return err
	}
	defer stopCeiling()

	pipeURL, pipePIDs, stopPipe, err := startPipeFloor()
	if err != nil {
		return err
	}
	defer stopPipe()

	// Targets, in the order of the table. server reads the CPU time of the
	// processes that a request costs besides the load generator, which runs in a
	// process of its own: this process (which hosts the gateway) and its workers,
	// or the seed server.
	gateway := gatewayMeter()
	type target struct {
		key, name, url string
		server         cpuMeter
	}
	var targets []target
	for _, f := range functions {
		targets = append(targets, target{f.name, "gateway " + f.name, base + "/hooks/default/" + f.name, gateway})
	}
	seed := processesMeter(func() []int { return []int{seedPID} })
	targets = append(targets,
		target{"seed", seedName, seedURL, seed},
		target{"ceiling", "net/http, constant answer", ceilingURL, gateway},
		target{"pipe", "net/http + a pipe round trip (floor)", pipeURL, pipeMeter(pipePIDs)})

	measure := func(t target) (result, error) {
		before := t.server()
		var r result
		var err error
		if loader == "wrk" {
			r, err = loadWrk(t.name, t.url, duration, clients, cluster.DataDir)
		} else {
			r, err = load(t.name, t.url, duration, clients)
		}
		if err == nil && r.requests > 0 {
			after := t.server()
			r.serverCPU = after.since(before) / time.Duration(r.requests)
			r.workersCPU = -1
			if after.hasWork {
				r.workersCPU = after.others(before) / time.Duration(r.requests)
			}
			r.loaderCPU /= time.Duration(r.requests)
		}
		return r, err
	}
	// Rounds interleave the targets, so that a noisy moment on a shared machine
	// falls on all of them; the table shows each target's median round.
	byTarget := map[string][]result{}
	for round := range rounds {
		for _, t := range targets {
			if !want(t.key) {
				continue
			}
			r, err := measure(t)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "round %d/%d  %-32s %8.0f req/s\n", round+1, rounds, t.name, r.rps)
			byTarget[t.key] = append(byTarget[t.key], r)
		}
	}
	seedRPS := 0.0
	if rs := byTarget["seed"]; len(rs) > 0 {
		seedRPS = median(rs).rps
	}
	fmt.Printf("trivial sync hook (echo one ConfigMap), %d concurrent clients, %s per target and round, median of %d rounds, load from %s, workers from %s\n", clients, duration, rounds, loader, workers)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\treq/s\tp50 (ms)\tp99 (ms)\tmax (ms)\terrors\tvs seed\tserver CPU/req (µs)\tof which workers (µs)\tload CPU/req (µs)\t")
	for _, t := range targets {
		rs := byTarget[t.key]
		if len(rs) == 0 {
			continue
		}
		r := median(rs)
		vs := "-"
		if seedRPS > 0 {
			vs = fmt.Sprintf("%.1fx", r.rps/seedRPS)
		}
		workers := "-"
		if r.workersCPU >= 0 && (strings.HasPrefix(t.name, "gateway ") || t.key == "pipe") {
			workers = fmt.Sprintf("%.0f", us(r.workersCPU))
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%s\t%.0f\t%s\t%.0f\t\n", r.name, r.rps, ms(r.p50), ms(r.p99), ms(r.max), r.errors, vs, us(r.serverCPU), workers, us(r.loaderCPU))
	}
	return w.Flush()
}

const seedName = "seed-style python http.server"

// median is the round with the median throughput (the lower middle one).
func median(rs []result) result {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.rps, b.rps) })
	return sorted[(len(sorted)-1)/2]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// startCeiling serves a constant hook response with nothing but net/http: the most
// any hook server can do on this machine with this load generator.
func startCeiling() (string, func(), error) {
	answer := []byte(`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench"},"data":{"hello":"world"}}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	return srv.URL, srv.Close, nil
}

// startPipeFloor serves the constant answer of startCeiling, but only once the
// request has been through a pipe round trip to one of a pool of cat processes
// (as many as the gateway's Python workers per function): the least any worker in a
// process of its own costs, a write that wakes the worker, its read and write,
// and the read that wakes the handler, with no interpreter, encoding or
// sandbox. The sandboxed runtimes' rows are measured against it.
func startPipeFloor() (string, []int, func(), error) {
	type cat struct {
		cmd     *exec.Cmd
		in, out *os.File
	}
	n := cmp.Or(pythonWorkers, min(max(2*runtime.GOMAXPROCS(0), 2), 8)) // as the gateway's Python pool
	idle := make(chan *cat, n)
	var cats []*cat
	var pids []int
	stop := func() {
		for _, c := range cats {
			c.in.Close()
			c.out.Close()
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	}
	for range n {
		inR, inW, err := os.Pipe()
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			stop()
			return "", nil, nil, err
		}
		cmd := exec.Command("cat")
		cmd.Stdin, cmd.Stdout = inR, outW
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		inR.Close()
		outW.Close()
		if err != nil {
			inW.Close()
			outR.Close()
			stop()
			return "", nil, nil, err
		}
		c := &cat{cmd: cmd, in: inW, out: outR}
		cats = append(cats, c)
		pids = append(pids, cmd.Process.Pid)
		idle <- c
	}
	answer := []byte(`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench"},"data":{"hello":"world"}}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := <-idle
		defer func() { idle <- c }()
		if _, err := c.in.Write(body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if _, err := io.ReadFull(c.out, body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	return srv.URL, pids, func() { srv.Close(); stop() }, nil
}

// pipeMeter counts this process and the pipe floor's cat processes, which are
// its "workers".
func pipeMeter(pids []int) cpuMeter {
	cats := processesMeter(func() []int { return pids })
	return func() cpuReading {
		r := cats()
		r.own, _ = procstat.CPU(os.Getpid())
		r.hasWork = true
		return r
	}
}

func startSeed(dir string) (string, func(), error) {
	script := filepath.Join(dir, "seed_hook.py")
	if err := os.WriteFile(script, []byte(seedServer), 0o600); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", script, fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	seedPID = cmd.Process.Pid
	url := fmt.Sprintf("http://127.0.0.1:%d/sync", port)
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	if err := kubetest.Wait(context.Background(), 10*time.Second, func(context.Context) (bool, error) { return post(url) == nil, nil }); err != nil {
		stop()
		return "", nil, fmt.Errorf("seed hook did not start: %w", err)
	}
	return url, stop, nil
}

func post(url string) error { return benchkit.Post(url, request) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// loadWrk measures with wrk, which costs the machine far less CPU per request than an
// in-process Go client, so the server under test gets more of the two cores.
func loadWrk(name, url string, d time.Duration, clients int, dir string) (result, error) {
	script := filepath.Join(dir, "post.lua")
	body, _ := json.Marshal(string(request))
	lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %s\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", body)
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		return result{}, err
	}
	cmd := exec.Command("wrk", "-t", "2", "-c", fmt.Sprint(clients), "-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", "-s", script, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	r, err := parseWrk(name, string(out), d)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.loaderCPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	return r, err
}

// parseWrk reads wrk's summary: the request count, non-2xx responses and errors, and
// the 50% and 99% latencies of its --latency distribution.
func parseWrk(name, out string, d time.Duration) (result, error) {
	r := result{name: name}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "50%":
			r.p50 = wrkDuration(f[1])
		case len(f) >= 2 && f[0] == "99%":
			r.p99 = wrkDuration(f[1])
		case len(f) >= 4 && f[0] == "Latency" && !strings.Contains(line, "Distribution"):
			r.max = wrkDuration(f[3])
		case len(f) >= 2 && f[1] == "requests":
			r.requests, _ = strconv.Atoi(f[0])
		case strings.HasPrefix(strings.TrimSpace(line), "Non-2xx"):
			n, _ := strconv.Atoi(f[len(f)-1])
			r.errors += n
		case strings.HasPrefix(strings.TrimSpace(line), "Socket errors"):
			for _, part := range strings.Split(strings.TrimPrefix(strings.TrimSpace(line), "Socket errors: "), ",") {
				if kv := strings.Fields(part); len(kv) == 2 {
					n, _ := strconv.Atoi(kv[1])
					r.errors += n
				}
			}
		}
	}
	if r.requests == 0 {
		return r, fmt.Errorf("wrk output not understood:\n%s", out)
	}
	r.rps = float64(r.requests) / d.Seconds()
	return r, nil
}

func wrkDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}
