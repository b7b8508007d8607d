package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

func TestQueueMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := newMetrics(reg)
	name := queueName(CompositeKind, "web")
	newQueue := func() workqueue.TypedRateLimitingInterface[string] {
		// Retries wait an hour: the retried item is counted but never added in the test.
		return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: m.queues})
	}
	q := newQueue()
	q.Add("a")
	q.Add("b")
	item, _ := q.Get()
	q.Done(item)
	q.AddRateLimited("c")
	q.ShutDown()

	want := `
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="CompositeController-web",name="CompositeController-web"} 2
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="CompositeController-web",name="CompositeController-web"} 1
# HELP workqueue_retries_total Total number of retries handled by workqueue
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="CompositeController-web",name="CompositeController-web"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "workqueue_adds_total", "workqueue_depth", "workqueue_retries_total"); err != nil {
		t.Error(err)
	}
	if got := seriesOf(t, reg, "workqueue_queue_duration_seconds"); got != 1 {
		t.Errorf("queue_duration series = %d, want 1", got)
	}

	// A queue rebuilt under the same name starts empty, whatever its predecessor held.
	newQueue().ShutDown()
	if got := testutil.ToFloat64(m.queues.depth.WithLabelValues(name, name)); got != 0 {
		t.Errorf("depth of the rebuilt queue = %v, want 0", got)
	}

	m.forget(CompositeKind, "web")
	for _, family := range []string{"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds", "workqueue_retries_total"} {
		if got := seriesOf(t, reg, family); got != 0 {
			t.Errorf("%s has %d series after the controller was forgotten", family, got)
		}
	}
}

func seriesOf(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
