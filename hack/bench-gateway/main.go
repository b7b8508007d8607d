// Command bench-gateway measures hook calls through the gateway: for a trivial sync
// hook (echo a ConfigMap per request) in each runtime, requests per second and p50/p99
// latency through /hooks/... with concurrent clients, side by side with a seed-style
// standalone Python http.server hook, the way Metacontroller hooks are usually written.
//
//	go run ./hack/bench-gateway -duration 5s -clients 16
package main

import (
	"bytes"
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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/localcluster"
	"github.com/metalambda/metalambda/internal/runtime"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
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
	duration := flag.Duration("duration", 5*time.Second, "load per target")
	clients := flag.Int("clients", 16, "concurrent clients")
	loader := flag.String("loader", "auto", "load generator: go (in process), wrk, or auto (wrk when installed)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.IntVar(&pythonWorkers, "python-workers", 0, "warm Python workers per function (0: the gateway's default)")
	only := flag.String("targets", "", "comma-separated targets to measure (javascript,python,jsonnet,builtin,seed); default all")
	flag.Parse()
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
	if err := run(*duration, *clients, *loader); err != nil {
		fmt.Fprintln(os.Stderr, "bench-gateway:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

var pythonWorkers int

// selected names the targets to measure; nil means all.
var selected map[string]bool

func want(target string) bool { return selected == nil || selected[target] }

type result struct {
	name          string
	requests      int
	errors        int
	rps           float64
	p50, p99, max time.Duration
}

func run(duration time.Duration, clients int, loader string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{EtcdNoFsync: true, Components: []localcluster.Component{}})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, ext, all...); err != nil {
		return err
	}
	base, stop, err := startGateway(cluster)
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

	measure := func(name, url string) (result, error) {
		if loader == "wrk" {
			return loadWrk(name, url, duration, clients, cluster.DataDir)
		}
		return load(name, url, duration, clients), nil
	}
	var results []result
	for _, f := range functions {
		if !want(f.name) {
			continue
		}
		r, err := measure("gateway "+f.name, base+"/hooks/default/"+f.name)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	seed := 0.0
	if want("seed") {
		r, err := measure("seed-style python http.server", seedURL)
		if err != nil {
			return err
		}
		results = append(results, r)
		seed = r.rps
	}
	fmt.Printf("trivial sync hook (echo one ConfigMap), %d concurrent clients, %s per target, load from %s\n", clients, duration, loader)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\trequests\terrors\treq/s\tp50 (ms)\tp99 (ms)\tmax (ms)\tvs seed\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.1f\t%.1fx\t\n", r.name, r.requests, r.errors, r.rps, ms(r.p50), ms(r.p99), ms(r.max), r.rps/seed)
	}
	return w.Flush()
}

func startGateway(cluster *localcluster.Cluster) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	base := "http://" + l.Addr().String()
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(cluster.Config, gateway.Options{PublicURL: base, Runtime: runtime.Options{PythonPoolSize: pythonWorkers, Builtins: runtime.Builtins{"echo": echo}}}, reg)
	if err != nil {
		return "", nil, err
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: gw.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))}}
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gw.Run(ctx) }()
	return base, func() { srv.Close(); cancel(); <-done }, nil
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
	url := fmt.Sprintf("http://127.0.0.1:%d/sync", port)
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	if err := kubetest.Wait(context.Background(), 10*time.Second, func(context.Context) (bool, error) { return post(url) == nil, nil }); err != nil {
		stop()
		return "", nil, fmt.Errorf("seed hook did not start: %w", err)
	}
	return url, stop, nil
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

func post(url string) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(request))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// load runs clients goroutines posting to url for d and summarises their latencies.
func load(name, url string, d time.Duration, clients int) result {
	var mu sync.Mutex
	var latencies []time.Duration
	errors := 0
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				start := time.Now()
				if err := post(url); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			errors += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(latencies)
	r := result{name: name, requests: len(latencies), errors: errors, rps: float64(len(latencies)) / d.Seconds()}
	if n := len(latencies); n > 0 {
		r.p50, r.p99, r.max = latencies[n/2], latencies[n*99/100], latencies[n-1]
	}
	return r
}

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
	out, err := exec.Command("wrk", "-t", "2", "-c", fmt.Sprint(clients), "-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", "-s", script, url).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	return parseWrk(name, string(out), d)
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
