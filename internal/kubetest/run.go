package kubetest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// ReadyTimeout is how long Run waits for a component to be ready.
const ReadyTimeout = 30 * time.Second

// Run runs a component (an engine, a gateway, a command's main path) in the
// background for the rest of the test: run gets a context that ends when the
// test ends or stop is called, and Run waits then for run to return and fails
// the test if it returned an error. what names the component in the messages.
// When ready is not nil, Run returns once it holds, failing the test after
// ReadyTimeout. stop, for a test that stops the component itself, may be called
// any number of times; it returns once run has.
func Run(t testing.TB, what string, run func(ctx context.Context) error, ready Condition) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s stopped with %v", what, err)
		}
	})
	t.Cleanup(stop)
	if ready != nil {
		Eventually(t, ReadyTimeout, what+" is ready", ready)
	}
	return stop
}
