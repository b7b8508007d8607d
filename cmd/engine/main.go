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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubeclient"
)

// options are the engine's command-line settings.
type options struct {
	kubeconfig          string
	qps                 float64
	burst               int
	metricsAddress      string
	healthProbeAddress  string
	applyStrategy       string
	targetLabelSelector string
	// services maps "name.namespace" to a base URL, for hooks given as a Service that
	// this engine cannot reach through cluster DNS (the local platform).
	services map[string]string
	engine   engine.Options
	leader   leaderOptions
}

func defaultOptions() *options {
	return &options{
		qps:                50,
		burst:              100,
		metricsAddress:     ":9999",
		healthProbeAddress: ":8081",
		applyStrategy:      string(engine.ServerSideApply),
		services:           map[string]string{},
		engine:             engine.Defaults(),
		leader:             defaultLeaderOptions(),
	}
}

func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig; empty means in-cluster configuration or $KUBECONFIG.")
	fs.Float64Var(&o.qps, "client-go-qps", o.qps, "Queries per second to the Kubernetes API.")
	fs.IntVar(&o.burst, "client-go-burst", o.burst, "Burst of queries to the Kubernetes API.")
	fs.IntVar(&o.engine.Workers, "workers", o.engine.Workers, "Reconcile goroutines per hosted controller.")
	fs.DurationVar(&o.engine.DiscoveryInterval, "discovery-interval", o.engine.DiscoveryInterval, "How often API discovery is refreshed (a lookup miss also refreshes it).")
	fs.DurationVar(&o.engine.CacheFlushInterval, "cache-flush-interval", o.engine.CacheFlushInterval, "How often informer caches are replayed, re-syncing every parent (0 disables).")
	fs.StringVar(&o.metricsAddress, "metrics-address", o.metricsAddress, "Address of the Prometheus /metrics endpoint; \"0\" disables it.")
	fs.StringVar(&o.healthProbeAddress, "health-probe-bind-address", o.healthProbeAddress, "Address of /healthz and /readyz; \"0\" disables them.")
	fs.StringVar(&o.applyStrategy, "apply-strategy", o.applyStrategy, "How children are written: server-side-apply or three-way (alias dynamic-apply).")
	fs.StringVar(&o.engine.FieldManager, "field-manager", o.engine.FieldManager, "Field manager name for server-side apply and writes.")
	fs.StringVar(&o.targetLabelSelector, "target-label-selector", o.targetLabelSelector, "Only serve CompositeController and DecoratorController objects whose labels match.")
	fs.Func("resolve-service", "name.namespace=URL: call hooks given as that Service at URL instead of http://name.namespace:port (repeatable; for engines outside the cluster).", func(v string) error {
		svc, url, ok := strings.Cut(v, "=")
		if !ok || !strings.Contains(svc, ".") || !(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
			return fmt.Errorf("want name.namespace=http://host:port, got %q", v)
		}
		o.services[svc] = strings.TrimRight(url, "/")
		return nil
	})
	o.leader.bindFlags(fs)
}

func (o *options) validate() error {
	strategy, err := engine.ParseApplyStrategy(o.applyStrategy)
	if err != nil {
		return err
	}
	o.engine.ApplyStrategy = strategy
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
	if o.qps <= 0 || o.burst <= 0 {
		return fmt.Errorf("--client-go-qps and --client-go-burst must be positive")
	}
	if err := o.leader.validate(); err != nil {
		return err
	}
	return o.engine.Validate()
}

func main() {
	klog.InitFlags(nil)
	opts := defaultOptions()
	opts.bindFlags(flag.CommandLine)
	flag.Parse()
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "Engine failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options) error {
	cfg, err := kubeclient.Config(o.kubeconfig, o.qps, o.burst)
	if err != nil {
		return err
	}
	klog.InfoS("Starting engine", "apiServer", cfg.Host, "workers", o.engine.Workers, "applyStrategy", o.engine.ApplyStrategy,
		"qps", o.qps, "burst", o.burst, "discoveryInterval", o.engine.DiscoveryInterval, "cacheFlushInterval", o.engine.CacheFlushInterval,
		"targetLabelSelector", o.engine.TargetSelector.String())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mgr, err := engine.New(cfg, o.engine, reg)
	if err != nil {
		return err
	}
	var elect *leader
	if o.leader.enabled {
		if elect, err = newLeader(cfg, o.leader, reg); err != nil {
			return err
		}
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	healthMux.HandleFunc("/readyz", readyz(mgr.Ready, elect))
	for _, srv := range []struct {
		addr    string
		handler http.Handler
	}{{o.metricsAddress, metricsMux}, {o.healthProbeAddress, healthMux}} {
		if err := serve(ctx, srv.addr, srv.handler); err != nil {
			return err
		}
	}
	if elect != nil {
		return elect.run(ctx, mgr.Run)
	}
	return mgr.Run(ctx)
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
