package kubetest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// PollInterval is how often Eventually checks its condition.
const PollInterval = 100 * time.Millisecond

var errNeverMet = errors.New("the condition never held (it gave no reason)")

// Context returns a context that ends when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// Condition reports whether what a test waits for holds. A non-nil error does not stop
// the wait: it says why the condition does not hold yet, and the last one is shown if
// the wait times out.
type Condition func(ctx context.Context) (bool, error)

// Eventually waits until cond holds, and fails the test if it does not within timeout,
// naming what it waited for and the last reason it was not met.
func Eventually(t testing.TB, timeout time.Duration, what string, cond Condition) {
	t.Helper()
	if err := Wait(Context(t), timeout, cond); err != nil {
		t.Fatalf("timed out after %s waiting until %s: %v", timeout, what, err)
	}
}

// Wait polls cond until it holds or timeout passes; the error describes the last
// failed check.
func Wait(ctx context.Context, timeout time.Duration, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errNeverMet
			}
			return last
		case <-tick.C:
		}
	}
}
