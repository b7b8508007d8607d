package engine

import (
	"fmt"
	"strconv"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// Annotations of CompositeController and DecoratorController objects that tune the
// controller's own work loop. They are annotations, not spec fields, because
// upstream's CRDs prune unknown spec fields: an annotation survives being applied
// with either engine's CRDs, and upstream ignores it.
const (
	// AnnotationMaxConcurrentSyncs caps how many parents of the controller sync at
	// once: a positive integer, at most --workers (a larger value means --workers).
	AnnotationMaxConcurrentSyncs = "metalambda.dev/max-concurrent-syncs"
	// AnnotationSyncBackoffBase and AnnotationSyncBackoffMax set the exponential
	// backoff of a failing parent (Go durations such as "2s" or "5m"): retried after
	// base, then twice as long each time, up to max.
	AnnotationSyncBackoffBase = "metalambda.dev/sync-backoff-base"
	AnnotationSyncBackoffMax  = "metalambda.dev/sync-backoff-max"
)

// ReasonInvalidAnnotation is the reason of the Warning event recorded on a controller
// object whose loop annotations are invalid.
const ReasonInvalidAnnotation = "InvalidAnnotation"

// The engine's backoff of a failing parent, client-go's controller default (with its
// overall limit of 10 retries a second, bursts of 100, which stays under any setting).
const (
	defaultBackoffBase = 5 * time.Millisecond
	defaultBackoffMax  = 1000 * time.Second
)

var loopAnnotations = []string{AnnotationMaxConcurrentSyncs, AnnotationSyncBackoffBase, AnnotationSyncBackoffMax}

// loopSettings are what a controller's annotations ask of its work loop; zero values
// leave the engine's defaults.
type loopSettings struct {
	maxConcurrent           int
	backoffBase, backoffMax time.Duration
}

// parseLoopSettings reads the loop annotations. An invalid one is reported and left
// out, so that the engine's default applies; a maximum backoff below the base leaves
// both out.
func parseLoopSettings(annotations map[string]string) (s loopSettings, problems []string) {
	if v, ok := annotations[AnnotationMaxConcurrentSyncs]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			problems = append(problems, fmt.Sprintf("annotation %s: %q is not a positive integer; the engine's --workers applies", AnnotationMaxConcurrentSyncs, v))
		} else {
			s.maxConcurrent = n
		}
	}
	base, problem := backoffAnnotation(annotations, AnnotationSyncBackoffBase, defaultBackoffBase)
	problems = append(problems, problem...)
	maxDelay, problem := backoffAnnotation(annotations, AnnotationSyncBackoffMax, defaultBackoffMax)
	problems = append(problems, problem...)
	effBase, effMax := or(base, defaultBackoffBase), or(maxDelay, defaultBackoffMax)
	if (base > 0 || maxDelay > 0) && effMax < effBase {
		problems = append(problems, fmt.Sprintf("annotation %s (%s) is less than %s (%s); the engine's backoff applies (%s to %s)",
			AnnotationSyncBackoffMax, effMax, AnnotationSyncBackoffBase, effBase, defaultBackoffBase, defaultBackoffMax))
		return s, problems
	}
	s.backoffBase, s.backoffMax = base, maxDelay
	return s, problems
}

// backoffAnnotation is the positive duration of annotation key, 0 when it is absent
// or invalid (then with a problem).
func backoffAnnotation(annotations map[string]string, key string, def time.Duration) (time.Duration, []string) {
	v, ok := annotations[key]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, []string{fmt.Sprintf("annotation %s: %q is not a positive duration such as \"2s\" or \"5m\"; the engine's %s applies", key, v, def)}
	}
	return d, nil
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// workers is how many parents the controller syncs at once.
func (s loopSettings) workers(engineWorkers int) int {
	if s.maxConcurrent > 0 {
		return min(s.maxConcurrent, engineWorkers)
	}
	return engineWorkers
}

// rateLimiter is the backoff of the controller's queue: client-go's controller
// default, with the annotations' base and maximum.
func (s loopSettings) rateLimiter() workqueue.TypedRateLimiter[parentKey] {
	if s.backoffBase == 0 && s.backoffMax == 0 {
		return workqueue.DefaultTypedControllerRateLimiter[parentKey]()
	}
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[parentKey](or(s.backoffBase, defaultBackoffBase), or(s.backoffMax, defaultBackoffMax)),
		&workqueue.TypedBucketRateLimiter[parentKey]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// loopAnnotationValues are the loop annotations obj sets, for the hash that decides
// when a controller is rebuilt.
func loopAnnotationValues(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range loopAnnotations {
		if v, ok := annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}
