package ingress

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// wakeable reports whether a request for rt, which has no ready endpoint, can be held
// while its Ingress's wake target scales up; a malformed annotation answers 503 with
// the reason.
func (r *Router) wakeable(w http.ResponseWriter, rt route) bool {
	ref := rt.ingress
	switch {
	case r.demand == nil || (ref.wake == nil && ref.wakeErr == ""):
		return false
	case ref.wakeErr != "":
		http.Error(w, fmt.Sprintf("backend %s of Ingress %s is unavailable: %s, and the Ingress's %s",
			rt.backend.name, ref.key, rt.backend.unavailable, ref.wakeErr), http.StatusServiceUnavailable)
		return true
	}
	return true
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
		if got, ok := r.table.Load().match(host, path); ok && len(got.backend.endpoints) > 0 {
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
