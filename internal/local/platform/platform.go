// Package platform runs the whole of Metalambda on one machine: a real control plane
// (internal/localcluster), the engine, the gateway, the local ingress router and,
// when enabled, the local node; it installs the CRDs and the bundled operators. It is
// what `metalambda up` runs.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/deploy"
	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/egress"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/ingress"
	"github.com/metalambda/metalambda/internal/local/storage"
	"github.com/metalambda/metalambda/internal/manifest"
	"github.com/metalambda/metalambda/operators"
)

// GatewayService is the Service the bundled operators call their hooks through; the
// platform's engine reaches it at the gateway's local address.
const (
	GatewayService   = "metalambda-gateway"
	GatewayNamespace = "metalambda-system"
)

// Options configure the platform.
type Options struct {
	// DataDir holds the cluster's state, the kubeconfig and logs. Default ".metalambda".
	DataDir string
	// BinDir holds the control-plane binaries (see `make kube`).
	BinDir string
	// IngressAddress serves Ingress hosts. Default 127.0.0.1:8080.
	IngressAddress string
	// GatewayAddress serves the gateway API and hooks. Default 127.0.0.1:8081.
	GatewayAddress string
	// EngineAPIAddress serves the engine's API (recent hook calls, controllers and
	// parents) for the gateway's dashboard; it should stay on loopback. Default
	// 127.0.0.1:0, a free port (see Platform.EngineURL).
	EngineAPIAddress string
	// Node, when set, builds the local node that runs pods as processes (it needs root
	// and the CNI plugins). Without it pods stay Pending.
	Node func(kube kubernetes.Interface, dataDir string) (NodeRunner, error)
	// InCluster, when set, runs the engine and the gateway as pods installed from the
	// Helm chart, instead of in this process; it needs Node, built with
	// ComponentImages among its image rules.
	InCluster *InCluster
	// Builtins are the Go functions the in-process gateway's builtin runtime runs
	// (the operators' hooks); the command hands them over (cmd/metalambda passes
	// functions.Builtins()), so that this package does not pick them itself.
	Builtins lambda.Builtins
}

// NodeRunner is a local node: it runs until ctx ends and says when it is Ready.
type NodeRunner interface {
	Run(ctx context.Context) error
	Ready() bool
}

// Defaults are the options of `metalambda up` without flags; its flag defaults
// are these. Start hands every field to its component as it is: an empty address
// is refused by Check, not filled in.
func Defaults() Options {
	return Options{
		DataDir:          ".metalambda",
		IngressAddress:   "127.0.0.1:8080",
		GatewayAddress:   "127.0.0.1:8081",
		EngineAPIAddress: "127.0.0.1:0",
	}
}

// Check reports what would stop the platform from starting, in words a person can act
// on: ports taken, missing binaries, missing root or CNI plugins for the node.
func (o *Options) Check() error {
	var errs []error
	if o.DataDir == "" {
		errs = append(errs, errors.New("no data directory (platform.Defaults() has one)"))
	}
	for _, a := range []struct{ what, addr string }{{"ingress", o.IngressAddress}, {"gateway", o.GatewayAddress}, {"engine API", o.EngineAPIAddress}} {
		if a.addr == "" {
			errs = append(errs, fmt.Errorf("no %s address (platform.Defaults() has one)", a.what))
			continue
		}
		l, err := net.Listen("tcp", a.addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("the %s address %s is not free (%v): stop what uses it or pass another address", a.what, a.addr, err))
			continue
		}
		l.Close()
	}
	if o.InCluster == nil && len(o.Builtins) == 0 {
		errs = append(errs, errors.New("no builtin functions for the gateway: the command hands them over (functions.Builtins())"))
	}
	if o.BinDir == "" {
		errs = append(errs, errors.New("no control-plane binaries: run `make kube` (it prints their directory)"))
	}
	if o.Node != nil && os.Geteuid() != 0 {
		errs = append(errs, errors.New("the local node needs root (network namespaces, a bridge, mounts): run as root, or without --node"))
	}
	if o.InCluster != nil {
		if o.Node == nil {
			errs = append(errs, errors.New("the in-cluster mode runs the engine and the gateway as pods: it needs the local node (--node)"))
		}
		if err := o.InCluster.check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// GatewayURLFile is where the platform writes its gateway's URL, next to its
// kubeconfig, so that `metalambda fn` finds the gateway of the platform whose
// kubeconfig it is given.
func GatewayURLFile(dataDir string) string { return filepath.Join(dataDir, "gateway-url") }

// EngineURLFile is where the platform writes its engine API's URL, next to its
// kubeconfig, so that `metalambda sync` finds the engine of the platform whose
// kubeconfig it is given. Only a platform that runs the engine in its own process
// writes it.
func EngineURLFile(dataDir string) string { return filepath.Join(dataDir, "engine-url") }

// Platform is a running platform.
type Platform struct {
	opts       Options
	cluster    *cluster.Cluster
	Kubeconfig string
	stops      []func()
	engineURL  string
	// gatewayURL is where the gateway's API answers.
	gatewayURL string
	// sandbox is the in-process gateway's, chosen at Start.
	sandbox *sandbox.Sandbox
	// ready reports whether the in-process engine and gateway are ready.
	ready func() bool
	// node is the running local node, if any (RestartNode replaces it).
	node *runningNode
}

// EngineURL is the base URL of the engine's API, once started ("" in the in-cluster
// mode, where the chart's Service serves it).
func (p *Platform) EngineURL() string { return p.engineURL }

// Start brings everything up and returns once it serves. Stop ends it; a Start that
// fails stops what it started.
func Start(ctx context.Context, opts Options, log io.Writer) (*Platform, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	p := &Platform{opts: opts}
	if err := p.chooseSandbox(); err != nil {
		return nil, err
	}
	if err := p.start(ctx, log); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// chooseSandbox builds and probes the in-process gateway's sandbox before anything
// starts, so that a host without bubblewrap or Landlock is told at once, not after
// the control plane is up. It is closed last, once the gateway has stopped.
func (p *Platform) chooseSandbox() error {
	if p.opts.InCluster != nil {
		return nil // the gateway's pod sandboxes its own workers
	}
	sb, err := sandbox.New(sandbox.Options{Mode: gateway.Defaults().SandboxMode})
	if err != nil {
		return fmt.Errorf("the gateway cannot sandbox functions on this host: %w", err)
	}
	p.sandbox = sb
	p.stops = append(p.stops, sb.Close)
	return nil
}

func (p *Platform) start(ctx context.Context, log io.Writer) error {
	opts := p.opts
	step := func(format string, args ...any) { fmt.Fprintf(log, "metalambda: "+format+"\n", args...) }
	step("starting the control plane in %s", opts.DataDir)
	clusterOpts := cluster.Defaults()
	clusterOpts.BinDir, clusterOpts.DataDir = opts.BinDir, filepath.Join(opts.DataDir, "cluster")
	cluster, err := cluster.Start(ctx, clusterOpts)
	if err != nil {
		return err
	}
	p.cluster = cluster
	p.stops = append(p.stops, func() { _ = cluster.Stop() })
	p.Kubeconfig = filepath.Join(opts.DataDir, "kubeconfig")
	if err := copyFile(cluster.KubeconfigPath, p.Kubeconfig); err != nil {
		return err
	}
	if opts.InCluster != nil {
		_ = os.Remove(EngineURLFile(opts.DataDir)) // the engine's API is in the cluster now
		step("installing the CRDs, then the chart %s (the engine and the gateway as pods)", opts.InCluster.ChartDir)
	} else {
		p.gatewayURL = "http://" + opts.GatewayAddress
		if err := os.WriteFile(GatewayURLFile(opts.DataDir), []byte(p.gatewayURL+"\n"), 0o644); err != nil {
			return err
		}
		step("installing the CRDs and the bundled operators")
	}
	if err := p.install(ctx); err != nil {
		return err
	}
	return p.startComponents(ctx, log)
}

func (p *Platform) install(ctx context.Context) error {
	ext, err := apiextensionsclient.NewForConfig(p.cluster.Config)
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
	kube, err := kubernetes.NewForConfig(p.cluster.Config)
	if err != nil {
		return err
	}
	if err := storage.InstallClass(ctx, kube); err != nil {
		return err
	}
	if err := installDashboardAdmin(ctx, kube); err != nil {
		return err
	}
	if p.opts.InCluster != nil {
		return p.installChart(ctx)
	}
	applier, err := manifest.NewApplier(p.cluster.Config, "metalambda")
	if err != nil {
		return err
	}
	// The roles an install gives people (a namespace's admins write its namespaced
	// controllers, function-developer registers Functions), which the chart would
	// have installed.
	roles, err := deploy.UserRoles()
	if err != nil {
		return err
	}
	data, err := deploy.Encode(roles)
	if err != nil {
		return err
	}
	if _, err := applier.Apply(ctx, data); err != nil {
		return fmt.Errorf("the roles for people: %w", err)
	}
	return fs.WalkDir(operators.Manifests, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := operators.Manifests.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := applier.Apply(ctx, data); err != nil {
			return fmt.Errorf("operators/%s: %w", path, err)
		}
		return nil
	})
}

// startComponents runs the gateway, the engine, the ingress router and the node, each
// until Stop; in the in-cluster mode the node runs the engine and the gateway.
func (p *Platform) startComponents(ctx context.Context, log io.Writer) error {
	cfg := p.cluster.Config
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if p.opts.InCluster == nil {
		if err := p.startEngineAndGateway(kube); err != nil {
			return err
		}
	}
	volumes, err := storage.New(VolumeDir(p.opts.DataDir))
	if err != nil {
		return err
	}
	p.run(func(ctx context.Context) error { volumes.Run(ctx, kube); return nil })

	targets, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	routerOpts := ingress.Defaults()
	routerOpts.Targets = targets
	router, err := ingress.New(kube, routerOpts)
	if err != nil {
		return err
	}
	if err := p.serve(p.opts.IngressAddress, router); err != nil {
		return err
	}
	p.run(router.Run)

	if p.opts.Node == nil {
		fmt.Fprintln(log, "metalambda: running without the local node: pods stay Pending (pass --node, as root)")
		return waitUntil(time.Minute, "the gateway and the engine are ready", func() bool { return p.ready() && router.Ready() })
	}
	p.stops = append(p.stops, p.stopNode)
	if err := p.startNode(kube); err != nil {
		return err
	}
	if p.opts.InCluster != nil {
		return p.waitInCluster(ctx, kube, 3*time.Minute)
	}
	return nil
}

// egressDeny are the control plane's addresses, which the dashboard's "try it" never
// connects to (the gateway adds kube-apiserver, the engine's API and its own).
func egressDeny(addrs []cluster.Address) []egress.Destination {
	out := make([]egress.Destination, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, egress.Destination{Address: a.HostPort, What: a.What})
	}
	return out
}

// startEngineAndGateway runs the gateway and the engine in this process.
func (p *Platform) startEngineAndGateway(kube kubernetes.Interface) error {
	cfg := p.cluster.Config
	gatewayURL := "http://" + p.opts.GatewayAddress
	token, err := hookToken(p.opts.DataDir)
	if err != nil {
		return err
	}
	engineAPI, err := net.Listen("tcp", p.opts.EngineAPIAddress)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", p.opts.EngineAPIAddress, err)
	}
	p.engineURL = "http://" + engineAPI.Addr().String()
	if err := os.WriteFile(EngineURLFile(p.opts.DataDir), []byte(p.engineURL+"\n"), 0o644); err != nil {
		engineAPI.Close()
		return err
	}
	reg := prometheus.NewRegistry()
	opts := gateway.Defaults()
	opts.PublicURL, opts.HookToken, opts.EngineURL, opts.IngressAddress = gatewayURL, token, p.engineURL, p.opts.IngressAddress
	opts.EgressDeny, opts.Runtime.Builtins, opts.Runtime.Sandbox = egressDeny(p.cluster.Addresses()), p.opts.Builtins, p.sandbox
	gw, err := gateway.New(cfg, opts, reg)
	if err != nil {
		return err
	}
	if err := p.serveWith(p.opts.GatewayAddress, gateway.NewServer(gw.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))); err != nil {
		return err
	}
	p.run(func(ctx context.Context) error { gw.Run(ctx); return nil })

	engineOpts := engine.Defaults()
	engineOpts.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
		return gatewayURL, ref.Name == GatewayService && ref.Namespace == GatewayNamespace
	}
	engineOpts.HookHTTP = hook.TokenForHosts{Hosts: []string{p.opts.GatewayAddress}, Token: token, Next: newHookHTTP()}
	// Namespaced controllers call their namespace's Functions at the gateway's
	// address, or through its Service.
	engineOpts.TenantGateways = []string{gatewayURL, "http://" + GatewayService + "." + GatewayNamespace}
	mgr, err := engine.New(cfg, engineOpts, prometheus.NewRegistry())
	if err != nil {
		engineAPI.Close()
		return err
	}
	api, err := mgr.API(kube)
	if err != nil {
		engineAPI.Close()
		return err
	}
	p.serveOn(engineAPI, &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second})
	p.run(mgr.Run)
	p.ready = func() bool { return gw.Ready() && mgr.Ready() }
	return nil
}

// run starts a component; Stop cancels it and waits for it to return.
func (p *Platform) run(f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = f(ctx)
	}()
	p.stops = append(p.stops, func() { cancel(); wg.Wait() })
}

func (p *Platform) serve(addr string, h http.Handler) error {
	return p.serveWith(addr, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second})
}

func (p *Platform) serveWith(addr string, srv *http.Server) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	p.serveOn(l, srv)
	return nil
}

// serveOn serves srv on l until Stop.
func (p *Platform) serveOn(l net.Listener, srv *http.Server) {
	go func() { _ = srv.Serve(l) }()
	p.stops = append(p.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// Stop ends every component, newest first; the data directory stays.
func (p *Platform) Stop() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
	p.stops = nil
}

// Status is what `metalambda up` prints once the platform serves.
func (p *Platform) Status(w io.Writer) {
	gateway := fmt.Sprintf("%s (hooks need the bearer token in %s)", p.gatewayURL, HookTokenFile(p.opts.DataDir))
	engine, engineAPI := "in this process", p.engineURL
	if p.opts.InCluster != nil {
		gateway = fmt.Sprintf("%s (pods of the chart in %s)", p.gatewayURL, GatewayNamespace)
		engine = "pods of the chart in " + GatewayNamespace
		engineAPI = "the chart's Service metalambda-engine-api in " + GatewayNamespace
	}
	fmt.Fprintf(w, `
Metalambda is up.

  API server   %s
  gateway      %s
  engine       %s
  dashboard    %s
  engine API   %s
  ingress      http://%s
  data         %s
  local node   %s

Next:
  export KUBECONFIG=%s
  kubectl apply -f operators/pythonlambda/sample.yaml
  curl --resolve example.com:%s:%s 'http://example.com:%s/?name=Martin'

Dashboard login token (an admin of this local cluster):
  %s
`, p.cluster.Config.Host, gateway, engine, p.DashboardURL(), engineAPI, p.opts.IngressAddress, p.opts.DataDir, onOff(p.opts.Node != nil),
		p.Kubeconfig, port(p.opts.IngressAddress), host(p.opts.IngressAddress), port(p.opts.IngressAddress), DashboardTokenCommand)
}

// DashboardURL is where the gateway serves the web dashboard.
func (p *Platform) DashboardURL() string { return p.gatewayURL + "/ui/" }

func onOff(b bool) string {
	if b {
		return "running"
	}
	return "off (pods stay Pending)"
}

func host(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func waitUntil(timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

// VolumeDir is where the default StorageClass keeps the directories of the volumes it
// provisions: <data dir>/volumes, as an absolute path.
func VolumeDir(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir // the working directory is gone; New reports the relative path
	}
	return filepath.Join(abs, "volumes")
}

// PIDFile is where a running `metalambda up` records its process id.
func PIDFile(dataDir string) string { return filepath.Join(dataDir, "up.pid") }

// WritePID records the running process.
func WritePID(dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(PIDFile(dataDir), []byte(strconv.Itoa(os.Getpid())), 0o600)
}
