package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/gateway/egress"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/tracing"
)

// Options configure a gateway; cmd/gateway sets them from flags.
type Options struct {
	// Replica names this replica of the gateway (its pod's name) on the calls it
	// records; Peers, when set, lists the other replicas, whose recorded calls
	// the invocation list and replays merge with this one's.
	Replica string
	Peers   Peers
	// PublicURL is the base URL engines reach the gateway at; status.url of every
	// Function is PublicURL/hooks/<namespace>/<name>.
	PublicURL string
	// HookToken, when set, must be presented as a bearer token on /hooks.
	HookToken string
	// SeparateHooks serves /hooks only on HooksHandler, so that a network policy can
	// let only engines reach them; Handler then answers 404 on /hooks.
	SeparateHooks bool
	// MaxBodyBytes bounds request bodies; larger ones answer 413. Default 4 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout is how long a call's body (hooks, invoke, replay) may take to
	// arrive, read before the call takes a slot; slower ones answer 408. Default 30s.
	BodyReadTimeout time.Duration
	// History is how many invocations are kept per function. Default 50.
	History int
	// AuthCacheTTL is how long an accepted token and an authorization answer are
	// reused. Default 10s.
	AuthCacheTTL time.Duration
	// AuthNegativeTTL is how long a token the Kubernetes API refused is remembered.
	// Default 2s.
	AuthNegativeTTL time.Duration
	// AuthCacheSize bounds each authentication cache (tokens, decisions, clients with
	// failures), least recently used first out. Default 4096.
	AuthCacheSize int
	// FailedAuthBurst failed authentications are allowed per client address, then
	// FailedAuthRate per second; more answer 429 with Retry-After. Defaults 20 and 1.
	FailedAuthBurst int
	FailedAuthRate  float64
	// TrustedProxies are the addresses of proxies whose X-Forwarded-For names the
	// client for the failed-authentication limit. Default none: behind a proxy, every
	// client shares the proxy's budget.
	TrustedProxies []netip.Prefix
	// MaxConcurrentCalls is how many calls of one function run at once; more answer
	// 429 with Retry-After. Default 64.
	MaxConcurrentCalls int
	// MaxFunctionsPerNamespace is how many functions of one namespace the gateway
	// serves: the API refuses more (403), and a Function applied past it is not
	// loaded (Ready False, TooManyFunctions). Default 100.
	MaxFunctionsPerNamespace int
	// FunctionWorkers is how many Functions the gateway loads at once (compiles,
	// records the revision of and writes the status of), from its start and as
	// they are applied. Default 4.
	FunctionWorkers int
	// MaxCallsPerNamespace is how many calls of one namespace's functions run at
	// once, over all of them; more answer 429 with Retry-After. Default 256.
	MaxCallsPerNamespace int
	// MaxConcurrentReplays is how many replays (POST .../replay) the gateway runs at
	// once, over all functions: each starts workers of its own. More answer 429 with
	// Retry-After. Default 4.
	MaxConcurrentReplays int
	// EnvSourceTTL is how long a Secret or ConfigMap read for a Function's env
	// (spec.envFrom, spec.envValueFrom) is reused: a changed value reaches the
	// function's calls within it. A failed read is retried after at most 2s.
	// Default 10s.
	EnvSourceTTL time.Duration
	// AllowFunctionNetwork lets a Function ask for the host's network
	// (spec.network); without it such a Function is refused. Default false.
	AllowFunctionNetwork bool
	// Runtime configures the runtimes. When its Sandbox is nil and
	// InsecureNoSandbox is false, New builds one of SandboxMode.
	Runtime lambda.Options
	// SandboxMode is the sandbox New builds for the runtimes (default auto).
	SandboxMode sandbox.Mode
	// IngressAddress (host:port) is where the ingress router serves; the dashboard's
	// "try it" of PythonLambdas calls through it. Empty turns "try it" off.
	IngressAddress string
	// EgressDeny are destinations the dashboard's "try it" never connects to (package
	// egress), besides loopback, link-local, unspecified and multicast addresses and
	// those the gateway knows of: the Kubernetes API server, the engine's API and
	// PublicURL. List the platform's other control-plane ports here (etcd, the
	// gateway's listen addresses). IngressAddress is reached even so.
	EgressDeny []egress.Destination
	// Dashboard configures the web dashboard at /ui/ beyond what the options above
	// give it (its Config, Authenticate, EngineURL and IngressAddress are set here).
	Dashboard dashboard.Options
	// EngineURL is the base URL of the engine's API (package engineapi), which the
	// dashboard asks for hook calls, controllers and parents; "" when there is none.
	EngineURL string
	// TracerProvider traces every call of a function: a server span that continues
	// the caller's W3C trace context, with the queue wait, a worker's start and the
	// worker's time under it (see docs/tracing.md). Nil traces nothing.
	TracerProvider trace.TracerProvider
}

// Defaults are the options of a gateway without flags; cmd/gateway's flag
// defaults are these, and every other gateway (the local platform, the benchmarks,
// the tests) starts from them too. New takes no zero value for a default.
func Defaults() Options {
	return Options{
		MaxBodyBytes:             4 << 20,
		BodyReadTimeout:          30 * time.Second,
		History:                  50,
		AuthCacheTTL:             10 * time.Second,
		AuthNegativeTTL:          2 * time.Second,
		AuthCacheSize:            4096,
		FailedAuthBurst:          20,
		FailedAuthRate:           1,
		MaxConcurrentCalls:       64,
		MaxFunctionsPerNamespace: 100,
		FunctionWorkers:          DefaultFunctionWorkers,
		MaxCallsPerNamespace:     256,
		MaxConcurrentReplays:     4,
		EnvSourceTTL:             10 * time.Second,
		SandboxMode:              sandbox.ModeAuto,
		Runtime:                  lambda.Defaults(),
		Dashboard:                dashboard.Defaults(),
	}
}

// normalize writes PublicURL without a trailing slash, as status.url appends to it.
func (o *Options) normalize() { o.PublicURL = strings.TrimRight(o.PublicURL, "/") }

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if o.PublicURL == "" || !(strings.HasPrefix(o.PublicURL, "http://") || strings.HasPrefix(o.PublicURL, "https://")) {
		return errors.New("public URL must be an http:// or https:// URL (the address engines call hooks at)")
	}
	return o.validateBounds()
}

// validateBounds refuses a bound that is not positive: options that did not start
// from Defaults, which New no longer fills in behind the caller's back.
func (o *Options) validateBounds() error {
	for _, b := range []struct {
		name     string
		positive bool
	}{
		{"MaxBodyBytes", o.MaxBodyBytes > 0},
		{"BodyReadTimeout", o.BodyReadTimeout > 0},
		{"History", o.History > 0},
		{"AuthCacheTTL", o.AuthCacheTTL > 0},
		{"AuthNegativeTTL", o.AuthNegativeTTL > 0},
		{"AuthCacheSize", o.AuthCacheSize > 0},
		{"FailedAuthBurst", o.FailedAuthBurst > 0},
		{"FailedAuthRate", o.FailedAuthRate > 0},
		{"MaxConcurrentCalls", o.MaxConcurrentCalls > 0},
		{"MaxFunctionsPerNamespace", o.MaxFunctionsPerNamespace > 0},
		{"FunctionWorkers", o.FunctionWorkers > 0},
		{"MaxCallsPerNamespace", o.MaxCallsPerNamespace > 0},
		{"MaxConcurrentReplays", o.MaxConcurrentReplays > 0},
		{"EnvSourceTTL", o.EnvSourceTTL > 0},
	} {
		if !b.positive {
			return fmt.Errorf("gateway option %s must be positive (start the options from gateway.Defaults())", b.name)
		}
	}
	return nil
}

// chooseSandbox gives the runtimes the sandbox of SandboxMode unless they have one
// or run without: built and probed here, so that a host without bubblewrap or
// Landlock is told at the gateway's start, not at the first Function's compile.
// It returns the sandbox it built, which the gateway closes when it stops (nil
// when the caller gave one or none).
func (o *Options) chooseSandbox() (*sandbox.Sandbox, error) {
	if o.Runtime.Sandbox != nil || o.Runtime.InsecureNoSandbox {
		return nil, nil
	}
	sb, err := sandbox.New(sandbox.Options{Mode: o.SandboxMode})
	if err != nil {
		return nil, fmt.Errorf("cannot sandbox user code (Runtime.InsecureNoSandbox runs without a sandbox, for development only): %w", err)
	}
	o.Runtime.Sandbox = sb
	return sb, nil
}

func (o *Options) authOptions() httpapi.AuthOptions {
	return httpapi.AuthOptions{
		TTL: o.AuthCacheTTL, NegativeTTL: o.AuthNegativeTTL, CacheSize: o.AuthCacheSize,
		Failures:       httpapi.FailureLimits{Burst: o.FailedAuthBurst, Rate: o.FailedAuthRate},
		TrustedProxies: o.TrustedProxies,
	}
}

// Gateway serves functions and the API that manages them.
type Gateway struct {
	opts     Options
	dyn      dynamic.Interface
	registry *lambda.Registry
	compiler networkPolicy // registry, under the network policy
	store    *store
	auth     *httpapi.Auth
	calls    *callLimiter
	nsCalls  *callLimiter // keyed by namespace
	replays  *callLimiter // one key: replays are counted over the whole gateway
	// nsReplays counts replays per namespace, so that one namespace cannot hold
	// every replay of the gateway.
	nsReplays *callLimiter
	dash      *dashboard.Dashboard
	tracer    trace.Tracer // nil when tracing is off
	running   atomic.Bool
	draining  atomic.Bool
	// sandbox is the sandbox New built for the runtimes (nil when the options
	// held one), closed when Run returns so that its cgroups go with it.
	sandbox *sandbox.Sandbox
}

// New builds a gateway for the cluster cfg reaches. Unless opts hold a sandbox
// (or run without one), it builds one, which Run closes when it returns.
func New(cfg *rest.Config, opts Options, reg prometheus.Registerer) (g *Gateway, err error) {
	opts.normalize()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	sb, err := opts.chooseSandbox()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && sb != nil {
			sb.Close()
		}
	}()
	// Management requests write Functions as their caller; see callerHTTPClient.
	httpClient, err := callerHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	registry := lambda.NewRegistry(opts.Runtime)
	// Env sources are read as the gateway itself: what a namespace granted it.
	env := newEnvCache(kube, opts.EnvSourceTTL, min(opts.EnvSourceTTL, 2*time.Second), opts.AuthCacheSize)
	policy := networkPolicy{compiler: registry, allow: opts.AllowFunctionNetwork}
	g = &Gateway{
		sandbox:  sb,
		opts:     opts,
		dyn:      dyn,
		registry: registry,
		compiler: policy,
		store:    newStore(dyn, policy, env, opts.PublicURL, opts.History, newMetrics(reg, registry.Stats, opts.Runtime.MemoryBudget)),
		calls:    newCallLimiter(opts.MaxConcurrentCalls),
		nsCalls:  newCallLimiter(opts.MaxCallsPerNamespace),
		replays:  newCallLimiter(opts.MaxConcurrentReplays),

		nsReplays: newCallLimiter(max(opts.MaxConcurrentReplays/2, 1)),
		tracer:    tracing.Tracer(opts.TracerProvider),
	}
	if g.auth, err = httpapi.NewAuth(kube, opts.authOptions()); err != nil {
		return nil, err
	}
	g.store.maxPerNamespace = opts.MaxFunctionsPerNamespace
	g.store.workers = opts.FunctionWorkers
	dopts := opts.Dashboard
	dopts.Config, dopts.Authenticate = cfg, g.login
	dopts.EngineURL, dopts.IngressAddress = opts.EngineURL, opts.IngressAddress
	dopts.EgressDeny = append(dopts.EgressDeny, controlPlane(cfg, &opts)...)
	dopts.FunctionRates = g.store.rates
	dopts.FunctionsAPI = g.functionsAPI()
	if g.dash, err = dashboard.New(dopts); err != nil {
		return nil, err
	}
	return g, nil
}

// Run watches Function objects until ctx ends. When it returns, every Function's
// workers have stopped and the sandbox New built is closed.
func (g *Gateway) Run(ctx context.Context) {
	if g.sandbox != nil {
		defer g.sandbox.Close() // last: after the functions and the dashboard's replays
	}
	g.running.Store(true)
	defer g.running.Store(false)
	defer func() { _ = g.dash.Close() }()
	g.store.run(ctx)
}

// Ready reports whether every Function has been loaded once and the gateway is
// not draining.
func (g *Gateway) Ready() bool { return g.running.Load() && !g.draining.Load() && g.store.synced() }

// Drain makes /readyz fail from now on, while everything else is served as
// before: the first step of a graceful shutdown, so that Services and load
// balancers stop sending new calls before the listeners close.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Handler is the gateway's HTTP API; metrics is served at /metrics.
func (g *Gateway) Handler(metrics http.Handler) http.Handler { return g.routes(metrics) }

// RuntimeStats are the runtimes' worker counts, as the metrics export them.
func (g *Gateway) RuntimeStats() map[string]lambda.PoolStats { return g.registry.Stats() }

// HooksHandler serves /hooks alone (and /healthz), for a listener of its own when
// Options.SeparateHooks is set.
func (g *Gateway) HooksHandler() http.Handler { return g.hookRoutes() }

// DefaultGCPercent is the garbage-collection target the gateway command sets unless
// GOGC is in the environment. Hook calls allocate much short-lived memory over a
// small live heap; at Go's default of 100 the collector runs so often that it costs
// a fifth of a JavaScript call (make bench: 113 → 86 µs of CPU per call at 400),
// for a heap that stays a few tens of MiB.
const DefaultGCPercent = 400
