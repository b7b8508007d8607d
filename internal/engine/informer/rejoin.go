package informer

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// rejoinBackoff paces the attempts of a list or watch while the API server cannot be
// reached: quick at first, never more than a second apart, so that an informer
// watches again within a second of the API server's return.
var rejoinBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.25, Cap: 800 * time.Millisecond, Steps: 1 << 30}

// rejoining is a ListerWatcher that retries, in place, a list or watch request that
// failed because the API server is down, shutting down or still starting, until it
// succeeds, fails otherwise, or ctx ends.
//
// Without it, an API-server restart can leave a cache behind the API server for up
// to a minute after it is back. A reflector paces its retries with one exponential
// backoff (0.8 s doubling to 30 s, plus up to as much again as jitter) that it steps
// on every failed attempt and resets only after two minutes without one. The
// seconds of a restart or two make enough failed attempts (connection refused, 503
// while its APIs are not installed, 429 while its watch cache fills) to push it
// past ten seconds, and any informer may draw the long wait: its cache then misses
// every change, the engine's own writes included, while the API server already
// answers the engine's requests. The engine judges children and statuses from that
// cache and writes what is already written (status updates refused as conflicts,
// for one) at every resync until the informer watches again.
//
// Retried here, these failures never reach the reflector. Only a watch that ends
// steps its backoff (410 Gone once per restart: the new API server's watch cache
// starts after the last version the informer saw), which so stays at a few seconds.
type rejoining struct {
	lw      cache.ListerWatcherWithContext
	what    string // the resource, for the log
	backoff wait.Backoff
}

func rejoin(lw cache.ListerWatcherWithContext, what string) *rejoining {
	return &rejoining{lw: lw, what: what, backoff: rejoinBackoff}
}

var (
	_ cache.ListerWatcher            = (*rejoining)(nil)
	_ cache.ListerWatcherWithContext = (*rejoining)(nil)
)

// ListWithContext lists, retrying while the API server is unavailable.
func (r *rejoining) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return retryUnavailable(ctx, r, "list", func() (runtime.Object, error) { return r.lw.ListWithContext(ctx, options) })
}

// WatchWithContext starts a watch, retrying while the API server is unavailable.
func (r *rejoining) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return retryUnavailable(ctx, r, "watch", func() (watch.Interface, error) { return r.lw.WatchWithContext(ctx, options) })
}

// List is ListWithContext without a context, for the ListerWatcher interface.
func (r *rejoining) List(options metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), options)
}

// Watch is WatchWithContext without a context, for the ListerWatcher interface.
func (r *rejoining) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), options)
}

func retryUnavailable[T any](ctx context.Context, r *rejoining, verb string, do func() (T, error)) (T, error) {
	backoff := r.backoff
	for attempt := 1; ; attempt++ {
		out, err := do()
		if err == nil || !unavailable(err) {
			return out, err
		}
		delay := backoff.Step()
		// The first failure and then about one every ten seconds are logged, as
		// the reflector would log them.
		level := 4
		if attempt%10 == 1 {
			level = 0
		}
		klog.FromContext(ctx).V(level).Info("API server unavailable; retrying", "verb", verb, "resource", r.what, "attempt", attempt, "delay", delay, "err", err)
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(delay):
		}
	}
}

// unavailable tells the errors of an API server that is down, shutting down or
// starting from those of a request it refuses: those are returned as they are (a
// 410 Gone, for one, makes the reflector list again).
func unavailable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err)
}
