package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// asleep reports whether rt has no ready endpoint and its Ingress names a wake target
// (or tries to) that the router can wake.
func (r *Router) asleep(rt route) bool {
	return len(rt.backend.endpoints) == 0 && r.demand != nil && (rt.ingress.wake != nil || rt.ingress.wakeErr != "")
}

// wakeAndHold holds a request for an asleep route and returns the route that has an
// endpoint now; false when it answered the request with an error instead.
func (r *Router) wakeAndHold(w http.ResponseWriter, req *http.Request, host, path string, rt route) (route, bool) {
	if rt.ingress.wakeErr != "" {
		http.Error(w, fmt.Sprintf("backend %s of Ingress %s is unavailable: %s, and the Ingress's %s",
			rt.backend.name, rt.ingress.key, rt.backend.unavailable, rt.ingress.wakeErr), http.StatusServiceUnavailable)
		return rt, false
	}
	held, err := r.hold(req.Context(), host, path, rt)
	if err != nil {
		holdFailed(w, rt, err)
		return rt, false
	}
	return held, true
}

// hold waits until the route for host and path has a ready endpoint, after signalling
// demand to its wake target, within Options.HoldTimeout and Options.MaxHeld, and
// returns that route. The wait follows routing-table rebuilds: no polling.
func (r *Router) hold(ctx context.Context, host, path string, rt route) (route, error) {
	t := rt.ingress.wake
	start := time.Now()
	if !r.held.acquire(t.key) {
		r.metrics.hold("full", start)
		return route{}, &holdError{target: t, err: errHoldFull, detail: fmt.Sprintf(" (%d, Options.MaxHeld)", r.opts.MaxHeld)}
	}
	defer r.held.release(t.key)
	if err := r.demand.wake(ctx, t); err != nil {
		r.metrics.hold("error", start)
		return route{}, &holdError{target: t, err: fmt.Errorf("write annotation %s: %w", LastDemandAnnotation, err)}
	}
	timeout := time.NewTimer(r.opts.HoldTimeout)
	defer timeout.Stop()
	for {
		changed := r.rebuilt.wait()
		tbl := r.table.Load()
		if tbl == nil { // the router stopped
			return route{}, &holdError{target: t, err: errors.New("the ingress router stopped")}
		}
		if got, ok := tbl.match(host, path); ok && len(got.backend.endpoints) > 0 {
			r.metrics.hold("served", start)
			klog.FromContext(ctx).V(2).Info("Held request served", "target", t.key, "held", time.Since(start))
			return got, nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			r.metrics.hold("timeout", start)
			return route{}, &holdError{target: t, err: errHoldTimeout, detail: fmt.Sprintf(" (waited %s, Options.HoldTimeout)", r.opts.HoldTimeout)}
		case <-ctx.Done():
			r.metrics.hold("canceled", start)
			return route{}, ctx.Err()
		}
	}
}

// holdFailed answers a held request that could not be served: 503 with Retry-After.
func holdFailed(w http.ResponseWriter, rt route, err error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("backend %s of Ingress %s: %v", rt.backend.name, rt.ingress.key, err), http.StatusServiceUnavailable)
}
