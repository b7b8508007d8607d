package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Router routes HTTP requests to the endpoints of the Services that Ingresses name.
type Router struct {
	opts    Options
	client  kubernetes.Interface
	table   atomic.Pointer[table] // nil until the caches have synced
	running atomic.Bool
	proxy   *httputil.ReverseProxy
	metrics *metrics

	// Scale from zero (hold.go, wake.go): demand is nil without Options.Targets.
	demand  *demand
	held    *holds
	rebuilt *broadcast // notified after each new routing table
}

// New builds a router; Run makes it follow the cluster. It refuses options that
// Validate refuses.
func New(client kubernetes.Interface, opts Options) (*Router, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Router{opts: opts, client: client, proxy: newProxy(opts), metrics: newMetrics(opts.Registerer),
		held: &holds{max: opts.MaxHeld, n: map[string]int{}}, rebuilt: newBroadcast()}
	if opts.Targets != nil {
		r.demand = newDemand(func(ctx context.Context, t *wakeTarget, at time.Time) error {
			return patchDemand(ctx, opts.Targets, t, at)
		}, opts.DemandInterval)
	}
	return r, nil
}

// Run watches Ingresses, Services and EndpointSlices in every namespace and rebuilds the
// routing table after changes, until ctx ends. It returns nil when ctx ends, and an
// error only if the router cannot start.
func (r *Router) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("ingress router: Run is already running")
	}
	defer r.running.Store(false)
	w, err := newWatcher(r.client)
	if err != nil {
		return fmt.Errorf("ingress router: watch: %w", err)
	}
	defer w.stop()
	defer r.table.Store(nil)
	if !w.start(ctx) {
		return nil
	}
	r.rebuild(ctx, w)
	klog.FromContext(ctx).Info("Ingress router synced", "class", r.opts.ClassName)
	if r.demand != nil {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); r.demand.run(ctx) }()
		defer wg.Wait()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
			r.rebuild(ctx, w)
		}
	}
}

// rebuild replaces the routing table with one built from the caches.
func (r *Router) rebuild(ctx context.Context, w *watcher) {
	world, err := w.list()
	if err != nil { // listers read the local caches and do not fail; keep the old table if one does
		klog.FromContext(ctx).Error(err, "Cannot list from the caches; keeping the routing table")
		return
	}
	r.table.Store(buildTable(world, r.opts.ClassName, r.table.Load()))
	r.rebuilt.notify()
}

// Ready reports whether the router has synced its caches and built a routing table.
func (r *Router) Ready() bool { return r.table.Load() != nil }

// ServeHTTP routes one request; see the package documentation for the rules.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rec := &statusRecorder{ResponseWriter: w}
	host := r.serve(rec, req)
	r.metrics.observe(host, rec.status())
}

// serve answers req and returns the host label of the route that served it.
func (r *Router) serve(w http.ResponseWriter, req *http.Request) string {
	t := r.table.Load()
	if t == nil {
		http.Error(w, "the ingress router has not synced with the cluster yet", http.StatusServiceUnavailable)
		return ""
	}
	host := requestHost(req.Host)
	path, err := normalizePath(req.URL)
	if err != nil {
		http.Error(w, fmt.Sprintf("%v: %q has an encoded slash, a backslash or a NUL byte", err, req.URL.EscapedPath()), http.StatusBadRequest)
		return ""
	}
	// Forward what was matched, on a copy so the caller's request is untouched.
	req = req.Clone(req.Context())
	req.URL.Path, req.URL.RawPath = path, ""
	rt, ok := t.match(host, path)
	if !ok {
		http.Error(w, fmt.Sprintf("no Ingress serves host %q path %q", host, path), http.StatusNotFound)
		return ""
	}
	label := hostLabel(rt.host)
	if t := rt.ingress.wake; t != nil && r.demand != nil { // held or proxied, the request is demand
		r.demand.begin(t)
		defer r.demand.end(t)
	}
	if r.asleep(rt) {
		var ok bool
		if rt, ok = r.wakeAndHold(w, req, host, path, rt); !ok {
			return label
		}
	}
	be := rt.backend
	if len(be.endpoints) == 0 {
		http.Error(w, fmt.Sprintf("backend %s of Ingress %s is unavailable: %s", be.name, rt.ingress.key, be.unavailable), http.StatusServiceUnavailable)
		return label
	}
	tgt := &target{backend: be.name, endpoint: be.pick()}
	r.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), targetKey{}, tgt)))
	return label
}

// hostLabel is the metrics label of a rule host; "*" for rules without host and for
// default backends.
func hostLabel(ruleHost string) string {
	if ruleHost == "" {
		return "*"
	}
	return ruleHost
}
