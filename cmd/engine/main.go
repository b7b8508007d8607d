// Command engine runs Metacontroller-compatible CompositeControllers and
// DecoratorControllers (metacontroller.k8s.io/v1alpha1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/clientmetrics"
	"github.com/metalambda/metalambda/internal/endpoints"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/leader"
	"github.com/metalambda/metalambda/internal/gcpercent"
	"github.com/metalambda/metalambda/internal/kubeclient"
	"github.com/metalambda/metalambda/internal/logging"
	"github.com/metalambda/metalambda/internal/tracing/export"
	"github.com/metalambda/metalambda/internal/version"
)

// options are the engine's command-line settings.
type options struct {
	kubeconfig string
	// qps and burst are the client-side rate limit. Unless either flag is given, the
	// engine goes without one when the API server does API Priority and Fairness, and
	// uses them otherwise.
	qps                 float64
	burst               int
	explicitRate        bool
	metricsAddress      string
	healthProbeAddress  string
	pprofAddress        string
	applyStrategy       string
	targetLabelSelector string
	// fieldManager and ssaFieldManager are --field-manager and its upstream name
	// --apply-strategy-ssa-field-manager.
	fieldManager, ssaFieldManager logging.OptionalString
	// services maps "name.namespace" to a base URL, for hooks given as a Service that
	// this engine cannot reach through cluster DNS (the local platform).
	services map[string]string
	log      logging.Options
	engine   engine.Options
	// logConfig is set by validate from log.
	logConfig logging.Config
	leader    leader.Options
	// apiAddress serves the hook call history API; "0" (the default) disables it and
	// the history, so that the engine opens no port upstream Metacontroller does not.
	apiAddress string
	// apiService and apiAdvertise publish the leader as the endpoint of a Service
	// (leader.Endpoint).
	apiService, apiAdvertise string
	apiEndpoint              *leader.Endpoint // set by validate
	// gcPercent is the garbage-collection target (as GOGC); GOGC in the environment
	// wins.
	gcPercent int
	// memoryLimit is the runtime's soft memory limit (--memory-limit, a quantity; "":
	// 90% of the container's limit); memoryLimitBytes is set from it by validate.
	// GOMEMLIMIT in the environment wins.
	memoryLimit      string
	memoryLimitBytes int64
	// hookTokenFile holds a bearer token that hook calls to hookTokenHosts carry
	// (a gateway's hook token).
	hookTokenFile  string
	hookTokenHosts []string
	// gatewayService ("namespace/name") is a gateway's Service whose hook calls go
	// straight to the replica that keeps the Function warm (hook.Sharded), at the
	// endpoints' port gatewayHooksPort; gatewayEndpoints follows them (set by run).
	gatewayService, gatewayHooksPort string
	gatewayEndpoints                 *endpoints.Service
}

// defaultGCPercent is the engine's garbage-collection target unless GOGC is set: Go's
// default. The caches hold most of the live heap, which grows to twice that between
// collections; at 50 it grew by half, for 1000 parents about 10 MiB less peak RSS, at
// the price of collecting twice as often, a sixth more engine CPU. The soft memory
// limit (--memory-limit, by default 90% of the container's) has the collector work
// harder as the heap nears the container's limit (make bench; see docs/engine.md,
// Performance).
const defaultGCPercent = 100

func defaultOptions() *options {
	return &options{
		qps:                50,
		burst:              100,
		metricsAddress:     ":9999",
		healthProbeAddress: ":8081",
		pprofAddress:       "0",
		apiAddress:         "0",
		applyStrategy:      string(engine.ServerSideApply),
		fieldManager:       logging.OptionalString{Value: engine.Defaults().FieldManager},
		ssaFieldManager:    logging.OptionalString{Value: engine.Defaults().FieldManager},
		services:           map[string]string{},
		gatewayHooksPort:   "hooks",
		log:                logging.Defaults(),
		engine:             engine.Defaults(),
		leader:             leader.Defaults(),
		gcPercent:          defaultGCPercent,
	}
}

func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig; empty means in-cluster configuration or $KUBECONFIG.")
	fs.Func("client-go-qps", fmt.Sprintf("Client-side limit of queries per second to the Kubernetes API; negative disables it. Default: no limit when the API server does API Priority and Fairness, else %g.", o.qps), func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		o.qps, o.explicitRate = f, true
		return err
	})
	fs.Func("client-go-burst", fmt.Sprintf("Burst of queries to the Kubernetes API over --client-go-qps. Default: no limit when the API server does API Priority and Fairness, else %d.", o.burst), func(v string) error {
		n, err := strconv.Atoi(v)
		o.burst, o.explicitRate = n, true
		return err
	})
	fs.IntVar(&o.engine.Workers, "workers", o.engine.Workers, "Reconcile goroutines per hosted controller.")
	fs.DurationVar(&o.engine.DiscoveryInterval, "discovery-interval", o.engine.DiscoveryInterval, "How often API discovery is refreshed (a lookup miss also refreshes it).")
	fs.DurationVar(&o.engine.CacheFlushInterval, "cache-flush-interval", o.engine.CacheFlushInterval, "How often informer caches are replayed, re-syncing every parent (0 disables).")
	fs.StringVar(&o.metricsAddress, "metrics-address", o.metricsAddress, "Address of the Prometheus /metrics endpoint; \"0\" disables it.")
	fs.StringVar(&o.healthProbeAddress, "health-probe-bind-address", o.healthProbeAddress, "Address of /healthz and /readyz; \"0\" disables them.")
	fs.StringVar(&o.pprofAddress, "pprof-address", o.pprofAddress, "Address of net/http/pprof's /debug/pprof/ endpoints; \"0\" disables them.")
	fs.StringVar(&o.apiService, "api-service", "", "NAMESPACE/NAME of a Service without selector whose endpoint is the replica that serves the API (the leader): it writes the EndpointSlice NAME-leader. Needs a fixed port in --api-address.")
	fs.StringVar(&o.apiAdvertise, "api-advertise-address", os.Getenv("POD_IP"), "This replica's IPv4 address for --api-service (default $POD_IP).")
	fs.StringVar(&o.apiAddress, "api-address", o.apiAddress, "Address of the authenticated API of recent hook calls, controllers and parents (docs/engine.md), e.g. :9095; \"0\" disables it and the call history.")
	fs.IntVar(&o.engine.HookCallHistory, "hook-call-history", o.engine.HookCallHistory, "Recent hook calls kept for the API (each body up to 32 KiB); 0 records none.")
	fs.Float64Var(&o.engine.CodeChangeSyncRate, "code-change-sync-rate", o.engine.CodeChangeSyncRate, "Parents per second queued for a sync when the code of a gateway Function that serves their controller changes.")
	fs.Float64Var(&o.engine.EventsQPS, "events-qps", o.engine.EventsQPS, "Events recorded per second on each object once its burst is spent (default: one every 5 minutes).")
	fs.IntVar(&o.engine.EventsBurst, "events-burst", o.engine.EventsBurst, "Events recorded on each object before --events-qps applies.")
	fs.IntVar(&o.gcPercent, "gc-percent", o.gcPercent, "Go garbage-collection target (as GOGC): the heap grows by this percentage of the live heap between collections. The GOGC environment variable, when set, wins.")
	fs.StringVar(&o.memoryLimit, "memory-limit", o.memoryLimit, "Go runtime's soft memory limit (a quantity such as 450Mi), near which the collector works harder than --gc-percent says; empty means 90% of the container's memory limit (cgroup), or none outside a container. The GOMEMLIMIT environment variable, when set, wins.")
	fs.StringVar(&o.applyStrategy, "apply-strategy", o.applyStrategy, "How children are written: server-side-apply or three-way (alias dynamic-apply).")
	fs.Var(&o.fieldManager, "field-manager", "Field manager name for server-side apply and writes.")
	fs.Var(&o.ssaFieldManager, "apply-strategy-ssa-field-manager", "Upstream's name of --field-manager.")
	fs.StringVar(&o.targetLabelSelector, "target-label-selector", o.targetLabelSelector, "Only serve CompositeController and DecoratorController objects whose labels match.")
	fs.Func("resolve-service", "name.namespace=URL: call hooks given as that Service at URL instead of http://name.namespace:port (repeatable; for engines outside the cluster).", func(v string) error {
		svc, url, ok := strings.Cut(v, "=")
		if !ok || !strings.Contains(svc, ".") || !(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
			return fmt.Errorf("want name.namespace=http://host:port, got %q", v)
		}
		o.services[svc] = strings.TrimRight(url, "/")
		return nil
	})
	fs.StringVar(&o.gatewayService, "gateway-service", o.gatewayService, "namespace/name of a Metalambda gateway's Service: hook calls to it (http://name.namespace...) go straight to one of its ready replicas, the same one or two for every call of a Function (rendezvous hashing), so that each replica keeps warm only its share of the workers; the Service's address serves when no replica can be connected to.")
	fs.StringVar(&o.gatewayHooksPort, "gateway-hooks-port", o.gatewayHooksPort, "Name of the port of --gateway-service's endpoints that serves hooks.")
	fs.StringVar(&o.hookTokenFile, "hook-token-file", "", "File holding a bearer token (a gateway's hook token) that hook calls to --hook-token-host carry, unless their webhook sets its own authorization.")
	fs.Func("hook-token-host", "Where --hook-token-file's token goes: host:port, a host on any port, or a Service as name.namespace (also matching name.namespace.svc and name.namespace.svc.cluster.local) (repeatable).", func(v string) error {
		if v == "" || strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("want host, host:port or name.namespace, got %q", v)
		}
		o.hookTokenHosts = append(o.hookTokenHosts, v)
		return nil
	})
	fs.IntVar(&o.engine.MaxNamespacedControllersPerNamespace, "max-namespaced-controllers-per-namespace", o.engine.MaxNamespacedControllersPerNamespace, "Namespaced controllers (NamespacedCompositeController, NamespacedDecoratorController) run per namespace, the oldest first; the others get Ready=False TooManyControllers. 0 means no limit.")
	fs.Float64Var(&o.engine.NamespaceSyncRate, "namespace-sync-rate", o.engine.NamespaceSyncRate, "Parent syncs per second of all the namespaced controllers of one namespace (a token bucket per namespace); 0 means no limit.")
	fs.IntVar(&o.engine.NamespaceSyncBurst, "namespace-sync-burst", o.engine.NamespaceSyncBurst, "Burst of --namespace-sync-rate.")
	fs.Func("tenant-gateway-url", "Base URL of the gateway (e.g. http://metalambda-gateway.metalambda-system:8080) under which a namespaced controller may call the Functions of its own namespace, at BASE/hooks/NAMESPACE/FUNCTION (repeatable). Without it, namespaced controllers call Services of their namespace only.", func(v string) error {
		o.engine.TenantGateways = append(o.engine.TenantGateways, strings.TrimRight(v, "/"))
		return nil
	})
	o.log.BindFlags(fs)
	o.leader.BindFlags(fs)
}

// hookToken reads --hook-token-file and gives its token to the hook calls to
// --hook-token-host: both flags, or neither.
func (o *options) hookToken() error {
	if (o.hookTokenFile == "") != (len(o.hookTokenHosts) == 0) {
		return errors.New("--hook-token-file and --hook-token-host go together: the token, and the gateway it is for")
	}
	if o.hookTokenFile == "" {
		return nil
	}
	data, err := os.ReadFile(o.hookTokenFile)
	if err != nil {
		return fmt.Errorf("--hook-token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return fmt.Errorf("--hook-token-file %s is empty", o.hookTokenFile)
	}
	o.engine.HookHTTP = hook.TokenForHosts{Hosts: o.hookTokenHosts, Token: token}
	return nil
}

// shardGatewayCalls sends the hook calls to --gateway-service through hook.Sharded,
// after the hook token is set on them.
func (o *options) shardGatewayCalls() error {
	if o.gatewayService == "" {
		return nil
	}
	ns, name, ok := strings.Cut(o.gatewayService, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("--gateway-service %q: want namespace/name", o.gatewayService)
	}
	if o.gatewayHooksPort == "" {
		return errors.New("--gateway-hooks-port is empty: name the port of --gateway-service's endpoints that serves hooks")
	}
	sharded := hook.Sharded{Service: name + "." + ns, Endpoints: func() []string {
		if o.gatewayEndpoints == nil {
			return nil
		}
		return o.gatewayEndpoints.Addresses(o.gatewayHooksPort, true)
	}}
	if t, ok := o.engine.HookHTTP.(hook.TokenForHosts); ok {
		t.Next = sharded
		o.engine.HookHTTP = t
	} else {
		o.engine.HookHTTP = sharded
	}
	return nil
}

func (o *options) validate() error {
	var err error
	if o.logConfig, err = o.log.Config(); err != nil {
		return err
	}
	strategy, err := engine.ParseApplyStrategy(o.applyStrategy)
	if err != nil {
		return fmt.Errorf("--apply-strategy: %w", err)
	}
	o.engine.ApplyStrategy = strategy
	if o.engine.FieldManager, err = o.resolveFieldManager(); err != nil {
		return err
	}
	o.engine.TargetSelector, err = labels.Parse(o.targetLabelSelector)
	if err != nil {
		return fmt.Errorf("--target-label-selector: %w", err)
	}
	if len(o.services) > 0 {
		services := o.services
		o.engine.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			url, ok := services[ref.Name+"."+ref.Namespace]
			return url, ok
		}
	}
	if o.qps == 0 || (o.qps > 0 && o.burst <= 0) {
		return fmt.Errorf("--client-go-qps must be positive (negative disables the client-side limit) and --client-go-burst positive with it, got %g and %d", o.qps, o.burst)
	}
	if !(o.engine.EventsQPS > 0) {
		return fmt.Errorf("--events-qps must be positive, got %g", o.engine.EventsQPS)
	}
	if o.engine.EventsBurst < 1 {
		return fmt.Errorf("--events-burst must be at least 1, got %d", o.engine.EventsBurst)
	}
	if err := o.leader.Validate(); err != nil {
		return err
	}
	if o.gcPercent < 1 {
		return fmt.Errorf("--gc-percent must be at least 1, got %d (GOGC=off in the environment turns collection off)", o.gcPercent)
	}
	if o.memoryLimit != "" {
		q, err := resource.ParseQuantity(o.memoryLimit)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("--memory-limit must be a positive quantity such as 450Mi, got %q", o.memoryLimit)
		}
		o.memoryLimitBytes = q.Value()
	}
	if o.engine.HookCallHistory < 0 {
		return fmt.Errorf("--hook-call-history must not be negative, got %d", o.engine.HookCallHistory)
	}
	if o.apiAddress == "0" || o.apiAddress == "" {
		o.engine.HookCallHistory = 0 // nobody could read it
	}
	if o.apiEndpoint, err = leader.ParseEndpoint(o.apiService, o.apiAdvertise, o.apiAddress); err != nil {
		return err
	}
	if err := o.hookToken(); err != nil {
		return err
	}
	if err := o.shardGatewayCalls(); err != nil {
		return err
	}
	return o.engine.Validate()
}

// resolveFieldManager reads --field-manager and --apply-strategy-ssa-field-manager,
// which must agree when both are given.
func (o *options) resolveFieldManager() (string, error) {
	fm, ssa := o.fieldManager, o.ssaFieldManager
	name := "--field-manager"
	switch {
	case fm.Given && ssa.Given && fm.Value != ssa.Value:
		return "", fmt.Errorf("--field-manager=%q and --apply-strategy-ssa-field-manager=%q disagree; give one of them", fm.Value, ssa.Value)
	case ssa.Given:
		fm, name = ssa, "--apply-strategy-ssa-field-manager"
	}
	if fm.Value == "" {
		return "", fmt.Errorf("%s must not be empty", name)
	}
	return fm.Value, nil
}

func main() {
	opts := defaultOptions()
	opts.bindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println("engine", version.Get())
		return
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(2)
	}
	opts.logConfig.Install(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "Engine failed")
		os.Exit(1)
	}
}

// shutdownTracing exports the spans still buffered, for a few seconds at most.
func shutdownTracing(traces *export.Setup) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(ctx); err != nil {
		klog.ErrorS(err, "Cannot export the last spans")
	}
}

func run(ctx context.Context, o *options) error {
	cfg, err := kubeclient.Config(o.kubeconfig, o.qps, o.burst)
	if err != nil {
		return err
	}
	rateLimit := rateLimitOf(ctx, cfg, o.explicitRate)
	klog.InfoS("Starting engine", "apiServer", cfg.Host, "workers", o.engine.Workers, "applyStrategy", o.engine.ApplyStrategy,
		"fieldManager", o.engine.FieldManager, "clientRateLimit", rateLimit, "discoveryInterval", o.engine.DiscoveryInterval,
		"cacheFlushInterval", o.engine.CacheFlushInterval, "targetLabelSelector", o.engine.TargetSelector.String(),
		"eventsQPS", o.engine.EventsQPS, "eventsBurst", o.engine.EventsBurst, "pprofAddress", o.pprofAddress,
		"apiAddress", o.apiAddress, "hookCallHistory", o.engine.HookCallHistory, "hookTokenHosts", o.hookTokenHosts, "gatewayService", o.gatewayService, "gcPercent", gcpercent.Set(o.gcPercent),
		"memoryLimit", gcpercent.SetMemoryLimit(o.memoryLimitBytes))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	unregister, err := clientmetrics.Register(reg)
	if err != nil {
		return err
	}
	defer unregister()
	var elect *leader.Elector
	if o.leader.Enabled {
		if elect, err = leader.New(cfg, o.leader, reg); err != nil {
			return err
		}
		o.engine.Standby = elect.Standby // the API of a standby names the leader
	}
	traces, err := export.FromEnv(ctx, "metalambda-engine")
	if err != nil {
		return err
	}
	defer shutdownTracing(traces)
	if traces.Enabled() {
		klog.InfoS("Tracing", "exporters", traces.Exporters, "otlpProtocol", traces.Protocol)
	}
	o.engine.TracerProvider = traces.Provider
	mgr, err := engine.New(cfg, o.engine, reg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.gatewayService != "" {
		ns, name, _ := strings.Cut(o.gatewayService, "/")
		if o.gatewayEndpoints, err = endpoints.Watch(kube, ns, name); err != nil {
			return err
		}
		go o.gatewayEndpoints.Run(ctx)
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	healthMux.HandleFunc("/readyz", leader.Readyz(mgr.Ready, elect))
	api, err := mgr.API(kube)
	if err != nil {
		return err
	}
	for _, srv := range []struct {
		addr    string
		handler http.Handler
	}{{o.metricsAddress, metricsMux}, {o.healthProbeAddress, healthMux}, {o.pprofAddress, pprofMux()}, {o.apiAddress, api}} {
		if err := serve(ctx, srv.addr, srv.handler); err != nil {
			return err
		}
	}
	work := mgr.Run
	if o.apiEndpoint != nil {
		work = func(ctx context.Context) error {
			if err := o.apiEndpoint.Publish(ctx, kube); err != nil {
				return err
			}
			return mgr.Run(ctx)
		}
	}
	if elect != nil {
		return elect.Run(ctx, work)
	}
	return work(ctx)
}

// flowControlProbeTimeout bounds the start-up question whether the API server does
// API Priority and Fairness.
const flowControlProbeTimeout = 10 * time.Second

// rateLimitOf settles cfg's client-side rate limit and describes it. Explicit flags
// always win. Otherwise an API server with API Priority and Fairness paces the engine
// itself (queueing, and 429 with Retry-After, which client-go honours), so the engine
// adds no limit of its own; an API server without it, or one that cannot be asked,
// keeps the flags' defaults.
func rateLimitOf(ctx context.Context, cfg *rest.Config, explicit bool) string {
	if !explicit {
		probeCtx, cancel := context.WithTimeout(ctx, flowControlProbeTimeout)
		defer cancel()
		apf, err := kubeclient.ServerFlowControl(probeCtx, cfg)
		if err != nil {
			klog.InfoS("Cannot tell whether the API server does API Priority and Fairness; keeping the default client rate limit", "err", err.Error())
		}
		if apf {
			kubeclient.Unlimited(cfg)
			return "none (API Priority and Fairness)"
		}
	}
	if cfg.QPS < 0 {
		return "none"
	}
	return fmt.Sprintf("%g qps, burst %d", cfg.QPS, cfg.Burst)
}

// pprofMux serves net/http/pprof on a mux of its own, never on http.DefaultServeMux.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serve listens on addr ("0" disables) until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler) error {
	if addr == "0" || addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server failed", "address", addr)
		}
	}()
	klog.InfoS("Serving", "address", l.Addr().String())
	return nil
}
