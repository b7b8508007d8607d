package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// runInits runs the pod's init containers one after the other, each to a successful
// end, as a kubelet does: a failed one is restarted with back-off unless the pod's
// restartPolicy is Never. It returns true once they all succeeded, false when one
// failed for good or the pod stops first.
func (w *podWorker) runInits(ctx context.Context) bool {
	w.mu.Lock()
	inits := w.inits
	w.mu.Unlock()
	for _, c := range inits {
		if !c.runToCompletion(ctx) {
			return false
		}
	}
	w.mu.Lock()
	w.initialized = true
	w.mu.Unlock()
	w.notify()
	return true
}

// startContainers starts the pod's containers, once its init containers succeeded.
func (w *podWorker) startContainers(ctx context.Context) {
	w.mu.Lock()
	cs := w.containers
	w.mu.Unlock()
	for _, c := range cs {
		go c.run(ctx)
	}
}

// runToCompletion runs an init container until it exits 0 (true), or it fails with
// restartPolicy Never or the pod stops (false).
func (c *container) runToCompletion(ctx context.Context) bool {
	if !c.launch() {
		return false
	}
	defer close(c.done)
	opts := c.w.n.opts
	backoff := opts.BackoffInitial
	for first := true; ; first = false {
		if !first {
			c.mu.Lock()
			c.restarts++
			c.mu.Unlock()
		}
		exit := c.runOnce(ctx)
		c.w.notify()
		if exit == 0 {
			return true
		}
		if c.isStopping() || c.w.current().Spec.RestartPolicy == corev1.RestartPolicyNever {
			return false
		}
		c.setBackOff(backoff)
		select {
		case <-c.stopCh:
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, opts.BackoffMax)
	}
}
