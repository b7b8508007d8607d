// Command gateway serves hook functions (Function objects, metalambda.dev/v1alpha1) as
// Metacontroller hooks, with a REST API to manage them.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/gateway/egress"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/gcpercent"
	"github.com/metalambda/metalambda/internal/kubeclient"
	"github.com/metalambda/metalambda/internal/logging"
	"github.com/metalambda/metalambda/internal/tracing/export"
	"github.com/metalambda/metalambda/internal/version"
)

type options struct {
	kubeconfig    string
	listen        string
	hooksListen   string
	hookTokenFile string
	gcPercent     int
	sandboxMode   string
	memoryBudget  string
	egressDeny    []string
	qps           float64
	burst         int
	// peersService is the namespace/name of the Service whose endpoints are the
	// gateway's replicas, peersPort the name of their API's port, and podIP this
	// replica's own address among them.
	peersService, peersPort, podIP string
	// shutdownDelay is how long the gateway keeps serving after SIGTERM with
	// /readyz failing; shutdownTimeout bounds the wait for calls in flight.
	shutdownDelay, shutdownTimeout time.Duration
	gateway                        gateway.Options
}

func defaultOptions() *options {
	gw := gateway.Defaults()
	return &options{listen: "127.0.0.1:8081", qps: 50, burst: 100, gcPercent: gateway.DefaultGCPercent, sandboxMode: string(gw.SandboxMode), memoryBudget: "auto", gateway: gw,
		shutdownDelay: 5 * time.Second, shutdownTimeout: 30 * time.Second,
		peersPort: "api", podIP: os.Getenv("POD_IP")}
}

func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig; empty means in-cluster configuration or $KUBECONFIG.")
	fs.StringVar(&o.listen, "listen", o.listen, "Address to serve the API and the hooks on.")
	fs.StringVar(&o.hooksListen, "hooks-listen", o.hooksListen, "Address to serve /hooks on, apart from the API (so a network policy can let only engines reach them); empty serves them on --listen.")
	fs.StringVar(&o.gateway.PublicURL, "public-url", o.gateway.PublicURL, "Base URL engines call hooks at (default http://<hooks-listen or listen>).")
	fs.StringVar(&o.hookTokenFile, "hook-token-file", o.hookTokenFile, "File holding the hook token: calls to /hooks must present it, or a Kubernetes token allowed to invoke functions in the namespace, as a bearer token; empty leaves hooks open.")
	fs.Float64Var(&o.qps, "client-go-qps", o.qps, "Queries per second to the Kubernetes API.")
	fs.IntVar(&o.burst, "client-go-burst", o.burst, "Burst of queries to the Kubernetes API.")
	fs.StringVar(&o.gateway.Runtime.PythonBinary, "python", o.gateway.Runtime.PythonBinary, "CPython 3 interpreter for python functions.")
	fs.Int64Var(&o.gateway.Runtime.PythonMemoryLimit, "python-memory-limit", o.gateway.Runtime.PythonMemoryLimit, "Address-space limit of each Python worker, in bytes.")
	fs.Int64Var(&o.gateway.Runtime.ScriptMemoryLimit, "script-memory-limit", o.gateway.Runtime.ScriptMemoryLimit, "Address-space limit of each JavaScript and Jsonnet worker, in bytes (an idle worker holds about 1.3 GiB of address space; its heap gets the rest).")
	fs.IntVar(&o.gateway.Runtime.PythonPoolSize, "python-workers", o.gateway.Runtime.PythonPoolSize, "Most Python worker processes per function, started on demand (0: 2×GOMAXPROCS, between 2 and 8).")
	fs.DurationVar(&o.gateway.Runtime.WorkerIdleTimeout, "worker-idle-timeout", o.gateway.Runtime.WorkerIdleTimeout, "How long a worker process waits for a call before it is stopped; the next call starts a fresh one.")
	fs.IntVar(&o.gateway.Runtime.WorkerSpares, "worker-spares", o.gateway.Runtime.WorkerSpares, "Workers each runtime keeps started ahead, sandboxed and waiting for a function, so that a cold call only loads its function (0: none).")
	fs.StringVar(&o.memoryBudget, "worker-memory-budget", o.memoryBudget, "Memory of all worker processes together, as a quantity (1536Mi, 2Gi); past it idle workers are stopped, the least recently used first (of five chosen at random). auto: three quarters of the gateway's cgroup memory limit (its container's), none without one; 0: no budget.")
	fs.Int64Var(&o.gateway.Runtime.WorkerCPU, "worker-cpu", o.gateway.Runtime.WorkerCPU, "Processor time of each worker process and everything it starts, in thousandths of a core, where the gateway can give workers cgroups (as root on a host, or in a delegated cgroup).")
	fs.StringVar(&o.gateway.Runtime.PythonZygote, "python-zygote", o.gateway.Runtime.PythonZygote, "auto: fork Python workers from a zygote, a pre-started interpreter in a sandbox of its own that never holds a function, where the sandbox can start one (namespaces, the gateway root; elsewhere the gateway logs why not); off, and where there is none, each worker starts its own interpreter. A zygote is replaced after 64 forks or 10 minutes, and the workers it forked are replaced, once idle, by workers of the new one.")
	fs.StringVar(&o.gateway.Runtime.ScriptZygote, "script-zygote", o.gateway.Runtime.ScriptZygote, "auto: fork JavaScript and Jsonnet workers from a zygote, a Python fork server (--python) in a sandbox of its own that never holds a function, whose children sandbox themselves as a Python worker's do and then execute the worker executable, where a Python zygote can be built; off, and where there is none, bubblewrap and the launcher start each worker, at about one and a half times the processor time.")
	fs.StringVar(&o.sandboxMode, "sandbox", o.sandboxMode, "How worker processes are sandboxed: namespaces (bubblewrap), landlock (Landlock, seccomp and rlimits, for containers that refuse user namespaces), or auto (namespaces where bubblewrap can build them, landlock otherwise).")
	fs.BoolVar(&o.gateway.Runtime.InsecureNoSandbox, "insecure-no-sandbox", o.gateway.Runtime.InsecureNoSandbox, "Run Python workers as plain processes of the gateway's user and JavaScript and Jsonnet functions in the gateway's process, without a sandbox (development only).")
	fs.BoolVar(&o.gateway.AllowFunctionNetwork, "allow-function-network", o.gateway.AllowFunctionNetwork, "Let a Function ask for the host's network (spec.network: true); without it such a Function is refused.")
	fs.IntVar(&o.gateway.History, "history", o.gateway.History, "Invocations kept per function.")
	fs.IntVar(&o.gateway.MaxConcurrentCalls, "max-concurrent-calls", o.gateway.MaxConcurrentCalls, "Calls of one function that run at once; more answer 429 with Retry-After.")
	fs.IntVar(&o.gateway.FunctionWorkers, "function-workers", o.gateway.FunctionWorkers, "Functions loaded at once (compiled, their revision recorded and their status written), at the gateway's start and as they are applied.")
	fs.IntVar(&o.gateway.MaxFunctionsPerNamespace, "max-functions-per-namespace", o.gateway.MaxFunctionsPerNamespace, "Functions of one namespace the gateway serves: the API refuses more (403), and a Function applied past it is not loaded (Ready False, TooManyFunctions).")
	fs.IntVar(&o.gateway.MaxCallsPerNamespace, "max-calls-per-namespace", o.gateway.MaxCallsPerNamespace, "Calls of one namespace's functions that run at once, over all of them; more answer 429 with Retry-After.")
	fs.DurationVar(&o.gateway.EnvSourceTTL, "env-source-ttl", o.gateway.EnvSourceTTL, "How long a Secret or ConfigMap read for a Function's env (spec.envFrom, spec.envValueFrom) is reused; a changed value reaches calls within it.")
	fs.IntVar(&o.gateway.AuthCacheSize, "auth-cache-size", o.gateway.AuthCacheSize, "Entries of each authentication cache (tokens, decisions, clients with failed authentications).")
	fs.IntVar(&o.gateway.FailedAuthBurst, "failed-auth-burst", o.gateway.FailedAuthBurst, "Failed authentications allowed per client address before 429, refilled at --failed-auth-rate.")
	fs.Float64Var(&o.gateway.FailedAuthRate, "failed-auth-rate", o.gateway.FailedAuthRate, "Failed authentications allowed per client address per second after the burst.")
	fs.Func("trusted-proxies", "Comma-separated addresses or CIDRs of proxies whose X-Forwarded-For names the client for --failed-auth-burst; without them every client behind a proxy shares its budget. May be repeated.", func(v string) error {
		return parsePrefixes(v, &o.gateway.TrustedProxies)
	})
	fs.StringVar(&o.gateway.EngineURL, "engine-url", o.gateway.EngineURL, "Base URL of the engine's API (its --api-address), which the dashboard at /ui/ reads controllers, parents and hook calls from; empty leaves those out.")
	fs.StringVar(&o.gateway.Dashboard.TraceURLTemplate, "trace-url-template", o.gateway.Dashboard.TraceURLTemplate, "URL of a trace in a tracing UI, with {traceID} in place of the ID (http://jaeger:16686/trace/{traceID}); the dashboard links the trace IDs of hook calls and invocations to it. Empty shows them as text. Tracing itself is set with the OTEL_* environment variables (docs/tracing.md).")
	fs.BoolVar(&o.gateway.Dashboard.SecureCookies, "secure-cookies", o.gateway.Dashboard.SecureCookies, "Mark the dashboard's session cookies Secure on plain-HTTP requests too, for a gateway behind a TLS-terminating proxy or ingress (requests over TLS always get them Secure).")
	fs.StringVar(&o.gateway.IngressAddress, "ingress-address", o.gateway.IngressAddress, "host:port of the ingress that serves PythonLambdas' hosts, through which the dashboard's \"try it\" calls them; empty turns \"try it\" off.")
	fs.Func("egress-deny", "Comma-separated host:port destinations the dashboard's \"try it\" never connects to (e.g. etcd's client port), besides loopback, link-local, unspecified and multicast addresses, the Kubernetes API server, the engine's API and the gateway's own addresses; a host left empty or 0.0.0.0 means every address on the port. May be repeated.", func(v string) error {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				o.egressDeny = append(o.egressDeny, item)
			}
		}
		return nil
	})
	fs.IntVar(&o.gcPercent, "gc-percent", o.gcPercent, "Go garbage-collection target (as GOGC); the GOGC environment variable, when set, wins.")
	fs.StringVar(&o.gateway.Replica, "replica-name", o.gateway.Replica, "This replica's name on the calls it records (default $POD_NAME, else the host's name).")
	fs.StringVar(&o.peersService, "peers-service", o.peersService, "namespace/name of the Service whose endpoints are this gateway's replicas: lists of recorded calls and replays merge every replica's (empty: this replica's alone).")
	fs.StringVar(&o.peersPort, "peers-port", o.peersPort, "Name of the port of --peers-service that serves the replicas' API.")
	fs.StringVar(&o.podIP, "pod-ip", o.podIP, "This replica's address among the endpoints of --peers-service (default $POD_IP).")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", o.shutdownDelay, "On SIGTERM, how long the gateway goes on serving with /readyz failing before it stops accepting connections, so that Services, ingresses and engines stop sending it calls first.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", o.shutdownTimeout, "After --shutdown-delay, how long the gateway waits for calls in flight to finish before it stops their workers; a pod's terminationGracePeriodSeconds should exceed the two together.")
}

func (o *options) validate() error {
	mode, err := sandbox.ParseMode(o.sandboxMode)
	if err != nil {
		return fmt.Errorf("--sandbox: %w", err)
	}
	o.gateway.SandboxMode = mode
	if _, err := lambda.ParsePythonZygote(o.gateway.Runtime.PythonZygote); err != nil {
		return fmt.Errorf("--python-zygote: %w", err)
	}
	if _, err := lambda.ParsePythonZygote(o.gateway.Runtime.ScriptZygote); err != nil {
		return fmt.Errorf("--script-zygote: %w", err)
	}
	if err := dashboard.ValidateTraceURLTemplate(o.gateway.Dashboard.TraceURLTemplate); err != nil {
		return fmt.Errorf("--trace-url-template: %w", err)
	}
	if o.gateway.Replica == "" {
		o.gateway.Replica = os.Getenv("POD_NAME")
	}
	if o.gateway.Replica == "" {
		o.gateway.Replica, _ = os.Hostname()
	}
	if o.peersService != "" {
		if ns, name, ok := strings.Cut(o.peersService, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--peers-service %q: want namespace/name", o.peersService)
		}
		if o.peersPort == "" {
			return errors.New("--peers-port is empty: name the port of --peers-service that serves the replicas' API")
		}
	}
	if o.shutdownDelay < 0 || o.shutdownTimeout < 0 {
		return fmt.Errorf("--shutdown-delay %s and --shutdown-timeout %s may not be negative", o.shutdownDelay, o.shutdownTimeout)
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return fmt.Errorf("--listen %q: %w", o.listen, err)
	}
	if o.hooksListen != "" {
		if _, _, err := net.SplitHostPort(o.hooksListen); err != nil {
			return fmt.Errorf("--hooks-listen %q: %w", o.hooksListen, err)
		}
		if o.hooksListen == o.listen {
			return fmt.Errorf("--hooks-listen and --listen are both %s; leave --hooks-listen empty to serve hooks with the API", o.listen)
		}
		o.gateway.SeparateHooks = true
	}
	for _, d := range o.egressDeny {
		if _, _, err := net.SplitHostPort(d); err != nil {
			return fmt.Errorf("--egress-deny %q: %w", d, err)
		}
		o.gateway.EgressDeny = append(o.gateway.EgressDeny, egress.Destination{Address: d, What: d + " (--egress-deny)"})
	}
	o.gateway.EgressDeny = append(o.gateway.EgressDeny, egress.Destination{Address: o.listen, What: "the gateway's API"})
	if o.hooksListen != "" {
		o.gateway.EgressDeny = append(o.gateway.EgressDeny, egress.Destination{Address: o.hooksListen, What: "the gateway's hooks"})
	}
	if o.gateway.PublicURL == "" {
		o.gateway.PublicURL = "http://" + cmp.Or(o.hooksListen, o.listen)
	}
	budget, err := parseMemoryBudget(o.memoryBudget)
	if err != nil {
		return err
	}
	o.gateway.Runtime.MemoryBudget = lambda.NewMemoryBudget(budget)
	if o.hookTokenFile != "" {
		data, err := os.ReadFile(o.hookTokenFile)
		if err != nil {
			return fmt.Errorf("--hook-token-file: %w", err)
		}
		if o.gateway.HookToken = strings.TrimSpace(string(data)); o.gateway.HookToken == "" {
			return fmt.Errorf("--hook-token-file %s is empty", o.hookTokenFile)
		}
	}
	return o.gateway.Validate()
}

func main() {
	// A sandbox starts this executable again as its launcher or a script worker.
	lambda.ServeWorker()
	logOpts := logging.Defaults()
	logOpts.BindFlags(flag.CommandLine)
	opts := defaultOptions()
	opts.bindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println("gateway", version.Get())
		return
	}
	logConfig, err := logOpts.Config()
	if err == nil {
		err = opts.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	logConfig.Install(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, nil); err != nil {
		klog.ErrorS(err, "Gateway failed")
		os.Exit(1)
	}
}

// startTracing sets up tracing from the OTEL_* environment variables and logs what
// it exports to.
func startTracing(ctx context.Context) (*export.Setup, error) {
	traces, err := export.FromEnv(ctx, "metalambda-gateway")
	if err != nil {
		return nil, err
	}
	if traces.Enabled() {
		klog.InfoS("Tracing", "exporters", traces.Exporters, "otlpProtocol", traces.Protocol)
	}
	return traces, nil
}

// shutdownTracing exports the spans still buffered, for a few seconds at most.
func shutdownTracing(traces *export.Setup) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(ctx); err != nil {
		klog.ErrorS(err, "Cannot export the last spans")
	}
}

// buildSandbox gives the runtimes a sandbox of mode, failing with what is
// missing, unless the operator turned it off. The caller closes the sandbox it
// returns (nil without one) once the gateway has stopped.
func buildSandbox(rt *lambda.Options, mode sandbox.Mode) (*sandbox.Sandbox, error) {
	if rt.InsecureNoSandbox {
		klog.InfoS("WARNING: --insecure-no-sandbox: Python functions run as plain processes of the gateway's user, with its files, credentials and network, and JavaScript and Jsonnet functions in the gateway's process, without memory bounds")
		return nil, nil
	}
	sb, err := sandbox.New(sandbox.Options{Mode: mode})
	if err != nil {
		return nil, fmt.Errorf("cannot sandbox user code (--insecure-no-sandbox runs without a sandbox, for development only): %w", err)
	}
	klog.InfoS("Sandboxing user code", sb.Describe()...)
	rt.Sandbox = sb
	return sb, nil
}

// run serves until ctx ends. ready, when not nil, receives the listening address.
func run(ctx context.Context, o *options, ready chan<- string) error {
	o.gateway.Runtime.Builtins = functions.Builtins()
	sb, err := buildSandbox(&o.gateway.Runtime, o.gateway.SandboxMode)
	if err != nil {
		return err
	}
	if sb != nil {
		defer sb.Close() // last: the gateway has stopped every worker by then
	}
	cfg, err := kubeclient.Config(o.kubeconfig, o.qps, o.burst)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var runPeers func(context.Context)
	if o.peersService != "" {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		ns, name, _ := strings.Cut(o.peersService, "/")
		if o.gateway.Peers, runPeers, err = gateway.EndpointPeers(kube, ns, name, o.peersPort, o.podIP); err != nil {
			return err
		}
	}
	traces, err := startTracing(ctx)
	if err != nil {
		return err
	}
	defer shutdownTracing(traces)
	o.gateway.TracerProvider = traces.Provider
	gw, err := gateway.New(cfg, o.gateway, reg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	servers := []*http.Server{gateway.NewServer(gw.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))}
	listeners := []net.Listener{l}
	if o.hooksListen != "" {
		hl, err := net.Listen("tcp", o.hooksListen)
		if err != nil {
			l.Close()
			return fmt.Errorf("listen on %s: %w", o.hooksListen, err)
		}
		servers = append(servers, gateway.NewServer(gw.HooksHandler()))
		listeners = append(listeners, hl)
	}
	klog.InfoS("Starting gateway", "listen", l.Addr().String(), "hooksListen", o.hooksListen, "ingressAddress", o.gateway.IngressAddress, "egressDeny", o.egressDeny, "gcPercent", gcpercent.Set(o.gcPercent), "publicURL", o.gateway.PublicURL, "apiServer", cfg.Host, "hookToken", o.gateway.HookToken != "", "secureCookies", o.gateway.Dashboard.SecureCookies, "maxFunctionsPerNamespace", o.gateway.MaxFunctionsPerNamespace, "maxCallsPerNamespace", o.gateway.MaxCallsPerNamespace, "workerMemoryBudget", o.gateway.Runtime.MemoryBudget.Limit(), "replica", o.gateway.Replica, "peersService", o.peersService)
	if o.gateway.HookToken == "" {
		klog.InfoS("WARNING: no --hook-token-file: /hooks call any function for whoever reaches them", "address", cmp.Or(o.hooksListen, o.listen))
	}
	// The gateway and its servers stop together, when ctx ends or a server
	// fails: /readyz fails first while everything else is still served for
	// shutdownDelay, then the listeners close and the calls in flight finish
	// (within shutdownTimeout), and only then do the functions' workers stop.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if runPeers != nil {
			go runPeers(runCtx)
		}
		gw.Run(runCtx)
	}()
	go func() {
		<-ctx.Done()
		gw.Drain()
		klog.InfoS("Draining: /readyz fails, calls are still served", "for", o.shutdownDelay)
		time.Sleep(o.shutdownDelay)
		shutdown, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, srv := range servers {
			wg.Go(func() { _ = srv.Shutdown(shutdown) })
		}
		wg.Wait()
		if shutdown.Err() != nil {
			klog.InfoS("Calls still in flight at the shutdown timeout are cut", "timeout", o.shutdownTimeout)
		}
		stopRun()
	}()
	if ready != nil {
		ready <- l.Addr().String()
	}
	errs := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			err := srv.Serve(listeners[i])
			cancel()
			errs <- err
		}()
	}
	err = nil
	for range servers {
		if e := <-errs; !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
	}
	<-done
	return err
}

// parseMemoryBudget reads --worker-memory-budget: a quantity, 0 for none, or
// auto for three quarters of the gateway's cgroup memory limit (none without).
func parseMemoryBudget(v string) (int64, error) {
	if v == "auto" {
		if limit, ok := sandbox.MemoryLimit(); ok {
			return limit / 4 * 3, nil
		}
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--worker-memory-budget %q: want auto, 0 or a quantity of bytes such as 1536Mi", v)
	}
	return q.Value(), nil
}

// parsePrefixes appends the comma-separated addresses (as /32 or /128) and CIDRs of v
// to out.
func parsePrefixes(v string, out *[]netip.Prefix) error {
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			addr, aerr := netip.ParseAddr(item)
			if aerr != nil {
				return err
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		*out = append(*out, p.Masked())
	}
	return nil
}
