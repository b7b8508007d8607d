// Package workloop runs the workers of a client-go rate-limited work queue. A worker
// takes a key, processes it, marks it done and requeues it by what processing
// returned:
//
//   - success: the key is forgotten (its backoff reset), and processed again after
//     the duration returned, if positive;
//   - a transient error (any error): retried with the queue's backoff;
//   - a terminal error ([Terminal]): not retried; the next event for the key brings it
//     back;
//   - a panic: recovered, logged with its stack, and treated as a transient error, so
//     one bad key never stops the process.
//
// The engine's manager and hosted controllers and the gateway's Function store all run
// on it.
package workloop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

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
	// Failed, if set, is told of every failure, after the key was requeued.
	Failed func(ctx context.Context, key K, err error, terminal bool)
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
	after, err := l.process(ctx, key)
	var term *terminalError
	switch {
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
	if err != nil && l.Failed != nil {
		l.Failed(ctx, key, err, term != nil)
	}
	return true
}

func (l *Loop[K]) process(ctx context.Context, key K) (after time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Recovered from a panic; retrying with backoff", "key", key, "panic", r, "stack", string(debug.Stack()))
			after, err = 0, fmt.Errorf("panic: %v", r)
		}
	}()
	return l.Process(ctx, key)
}

// Terminal marks err as not worth retrying until the key changes.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }
