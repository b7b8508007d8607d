package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics is the workqueue.MetricsProvider of the engine's work queues. It
// serves the series controller-runtime serves for Metacontroller, labelled name and
// controller, both the queue's name:
//
//	workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
//	workqueue_work_duration_seconds, workqueue_unfinished_work_seconds,
//	workqueue_longest_running_processor_seconds, workqueue_retries_total
//
// It is given to each queue (not set process-wide), so every engine serves its own.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func newQueueMetrics() *queueMetrics {
	labels := []string{"name", "controller"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: name, Help: help}, labels)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}, labels)
	}
	return &queueMetrics{
		depth:        gauge("depth", "Current depth of workqueue"),
		adds:         counter("adds_total", "Total number of adds handled by workqueue"),
		latency:      histogram("queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested"),
		workDuration: histogram("work_duration_seconds", "How long in seconds processing an item from workqueue takes."),
		unfinished: gauge("unfinished_work_seconds", "How many seconds of work has been done that is in progress and hasn't been observed by "+
			"work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."),
		longest: gauge("longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running."),
		retries: counter("retries_total", "Total number of retries handled by workqueue"),
	}
}

func (q *queueMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(q.depth, q.adds, q.latency, q.workDuration, q.unfinished, q.longest, q.retries)
}

// forget drops the series of a queue that is gone for good.
func (q *queueMetrics) forget(name string) {
	labels := prometheus.Labels{"name": name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		q.depth, q.adds, q.latency, q.workDuration, q.unfinished, q.longest, q.retries,
	} {
		v.DeletePartialMatch(labels)
	}
}

// NewDepthMetric starts the depth at zero: a queue rebuilt under the same name must
// not inherit what its shut-down predecessor still held.
func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	g := q.depth.WithLabelValues(name, name)
	g.Set(0)
	return g
}

func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name, name)
}

func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name, name)
}

func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name, name)
}

func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name, name)
}

func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name, name)
}

func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name, name)
}
