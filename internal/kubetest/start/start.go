// Package start runs the platform's components in the calling process against a
// control plane: a gateway served on a free loopback port, an engine. The
// integration tests (through StartGateway and StartEngine, which stop them when
// the test ends) and the benchmarks (hack/internal/benchkit) use it, so that a
// component is assembled from its Defaults in one way everywhere. It is apart
// from package kubetest because internal/gateway's own tests use kubetest and
// cannot import the gateway twice.
package start

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// readyTimeout bounds how long a started component may take to load what it
// watches.
const readyTimeout = 30 * time.Second

// Gateway is a gateway served on a loopback port.
type Gateway struct {
	*gateway.Gateway
	// URL is where it serves, http://127.0.0.1:port.
	URL string
	// Registry holds its metrics, served at URL/metrics.
	Registry *prometheus.Registry
	stop     func()
}

// ServeGateway builds a gateway of opts (start them from gateway.Defaults()) for
// the cluster cfg reaches, serves it on a free loopback port and runs it until
// Stop. An empty opts.PublicURL becomes that port's URL. With opts.SeparateHooks
// it serves the hooks alone (HooksHandler), as the hooks listener of the chart's
// Deployment does.
func ServeGateway(cfg *rest.Config, opts gateway.Options) (*Gateway, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &Gateway{URL: "http://" + l.Addr().String(), Registry: prometheus.NewRegistry()}
	if opts.PublicURL == "" {
		opts.PublicURL = g.URL
	}
	if g.Gateway, err = gateway.New(cfg, opts, g.Registry); err != nil {
		l.Close()
		return nil, err
	}
	handler := g.Handler(promhttp.HandlerFor(g.Registry, promhttp.HandlerOpts{}))
	if opts.SeparateHooks {
		handler = g.HooksHandler()
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	g.stop = func() { srv.Close(); cancel(); <-done }
	return g, nil
}

// Stop stops serving and running the gateway.
func (g *Gateway) Stop() { g.stop() }

// StartGateway is ServeGateway for a test: it fails the test on an error,
// returns once the gateway has loaded every Function, and stops it when the test
// ends.
func StartGateway(t testing.TB, cfg *rest.Config, opts gateway.Options) *Gateway {
	t.Helper()
	g, err := ServeGateway(cfg, opts)
	if err != nil {
		t.Fatalf("start a gateway: %v", err)
	}
	t.Cleanup(g.Stop)
	kubetest.Eventually(t, readyTimeout, "the gateway is ready", func(context.Context) (bool, error) { return g.Ready(), nil })
	return g
}

// Engine is an engine running in this process.
type Engine struct {
	*engine.Manager
	cancel context.CancelFunc
	done   chan error
}

// RunEngine builds an engine of opts (start them from engine.Defaults()) for the
// cluster cfg reaches and runs it until Stop.
func RunEngine(cfg *rest.Config, opts engine.Options) (*Engine, error) {
	mgr, err := engine.New(cfg, opts, prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- mgr.Run(ctx) }()
	return e, nil
}

// Stop stops the engine and returns what its Run returned.
func (e *Engine) Stop() error {
	e.cancel()
	return <-e.done
}

// StartEngine is RunEngine for a test: it fails the test on an error and stops
// the engine when the test ends.
func StartEngine(t testing.TB, cfg *rest.Config, opts engine.Options) *Engine {
	t.Helper()
	e, err := RunEngine(cfg, opts)
	if err != nil {
		t.Fatalf("start an engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}
