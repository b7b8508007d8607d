// Package workloop runs the workers of a client-go rate-limited work queue. A worker
// takes a key, processes it, marks it done and requeues it by what processing
// returned:
//
//   - success: the key is forgotten (its backoff reset), and processed again after
//     the duration returned, if positive;
//   - a delay ([After]): processed again after the delay instead of the backoff;
//     with [Hold] the far side asked for the pause (Retry-After), and every event of
//     the key waits for it too;
//   - a transient error (any other error): retried with the queue's backoff;
//   - a terminal error ([Terminal]): not retried; the next event for the key brings it
//     back;
//   - a panic: recovered here and nowhere else, logged with its stack, and treated as
//     a transient error ([Panic]), so one bad key never stops the process.
//
// Each processing runs with a reconcile ID in its log context and, with [Metrics],
// is counted by result, timed, and counted among the active workers. The engine's
// manager and hosted controllers and the gateway's Function store all run on it, so
// they share one set of rules for retries.
package workloop

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Loop is one queue with its workers.
type Loop[K comparable] struct {
	Queue workqueue.TypedRateLimitingInterface[K]
	// Workers is how many keys are processed at once (at least one).
	Workers int
	// Process handles one key. It returns when to process the key again (0: only on
	// the next event) or an error.
	Process func(ctx context.Context, key K) (after time.Duration, err error)
	// Processed, if set, is told of every result of Process, a [Panic] included,
	// before the key is requeued: the caller's bookkeeping, which must see panics too.
	Processed func(ctx context.Context, key K, err error)
	// Failed, if set, is told of every failure, after the key was requeued. Delays are
	// no failures.
	Failed func(ctx context.Context, key K, err error, terminal bool)
	// Metrics, if set, count and time every processing under Name.
	Metrics *Metrics
	Name    string
	// Result, if set, names the result label of a processing that returned an error
	// (a panic included) for Metrics, so that an error the caller does not take for
	// a failure is not counted as one; "" or a nil Result count it as ResultError.
	Result func(err error) string

	// holds keeps, per key, the time before which a [Hold] forbids processing it.
	holds sync.Map // K -> time.Time
}

// Run processes keys until ctx ends, then shuts the queue down and waits for the
// workers to finish their current key.
func (l *Loop[K]) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		l.Queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range max(l.Workers, 1) {
		wg.Go(func() {
			for l.ProcessNext(ctx) {
			}
		})
	}
	wg.Wait()
}

// ProcessNext handles one key; it returns false once the queue is shut down.
func (l *Loop[K]) ProcessNext(ctx context.Context) bool {
	key, quit := l.Queue.Get()
	if quit {
		return false
	}
	defer l.Queue.Done(key)
	after, err := l.Handle(ctx, key)
	l.requeue(key, after, err)
	var term *terminalError
	if err != nil && !IsDelay(err) && l.Failed != nil {
		l.Failed(ctx, key, err, errors.As(err, &term))
	}
	return true
}

// Handle processes key once, as a worker does but without the queue: unless a hold
// is in force, it runs Process, keeps the hold it may ask for, and tells Processed.
// It returns what Process returned, or the time left of the hold.
func (l *Loop[K]) Handle(ctx context.Context, key K) (time.Duration, error) {
	if wait := l.held(key); wait > 0 {
		return wait, nil
	}
	after, err := l.process(ctx, key)
	var delay *delayError
	if errors.As(err, &delay) && delay.hold {
		l.holds.Store(key, time.Now().Add(delay.after))
	}
	if l.Processed != nil {
		l.Processed(ctx, key, err)
	}
	return after, err
}

// Held is how long a [Hold] on key still lasts (0: none): a key added meanwhile is
// processed only once it ends.
func (l *Loop[K]) Held(key K) time.Duration { return l.held(key) }

// held is how long a Hold on key still lasts.
func (l *Loop[K]) held(key K) time.Duration {
	until, ok := l.holds.Load(key)
	if !ok {
		return 0
	}
	if wait := time.Until(until.(time.Time)); wait > 0 {
		return wait
	}
	l.holds.Delete(key)
	return 0
}

// requeue puts key back as its result says.
func (l *Loop[K]) requeue(key K, after time.Duration, err error) {
	var term *terminalError
	var delay *delayError
	switch {
	case errors.As(err, &delay):
		l.Queue.Forget(key)
		l.Queue.AddAfter(key, delay.after)
	case errors.As(err, &term):
		l.Queue.Forget(key)
	case err != nil:
		l.Queue.AddRateLimited(key)
	default:
		l.Queue.Forget(key)
		if after > 0 {
			l.Queue.AddAfter(key, after)
		}
	}
}

// result is the result label of a processing that returned err.
func (l *Loop[K]) result(err error) string {
	if err == nil {
		return ResultSuccess
	}
	if l.Result != nil {
		if r := l.Result(err); r != "" {
			return r
		}
	}
	return ResultError
}

// process runs Process with a reconcile ID in the log context, measured, and
// recovers a panic into a [Panic] error.
func (l *Loop[K]) process(ctx context.Context, key K) (after time.Duration, err error) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("reconcileID", string(uuid.NewUUID())))
	done := l.Metrics.start(l.Name)
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Recovered from a panic; retrying with backoff", "key", key, "panic", r, "stack", string(debug.Stack()))
			after, err = 0, &Panic{Value: r}
		}
		done(l.result(err), err)
	}()
	return l.Process(ctx, key)
}
