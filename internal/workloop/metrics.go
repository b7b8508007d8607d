package workloop

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result labels of every loop; a Loop's Result may name others.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Metrics are the series of one or more loops, told apart by a label:
//
//	<prefix>_syncs_total{<label>,result}     processings, result success, error or a Loop.Result
//	<prefix>_sync_duration_seconds{<label>}  time to process one key
//	<prefix>_sync_panics_total{<label>}      processings that panicked
//	<prefix>_active_workers{<label>}         workers processing a key right now
//
// A held key is not processed, so it is not counted. A nil *Metrics counts nothing.
type Metrics struct {
	syncs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	panics   *prometheus.CounterVec
	active   *prometheus.GaugeVec
	label    string
}

// MetricsOptions name the series.
type MetricsOptions struct {
	Prefix string // e.g. metalambda_engine
	Label  string // the label that names the loop, e.g. controller
	Item   string // what a key names, for the help texts, e.g. parent
}

// NewMetrics builds the series and registers them with reg, if not nil.
func NewMetrics(reg prometheus.Registerer, o MetricsOptions) *Metrics {
	item := strings.ToUpper(o.Item[:1]) + o.Item[1:]
	m := &Metrics{
		label: o.Label,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: o.Prefix + "_syncs_total", Help: item + " syncs by " + o.Label + " and result (success, error, or what else the loop names).",
		}, []string{o.Label, "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: o.Prefix + "_sync_duration_seconds", Help: "Time to sync one " + o.Item + ", everything it waits for included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{o.Label}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: o.Prefix + "_sync_panics_total", Help: item + " syncs that panicked, by " + o.Label + " (each also counts as an error).",
		}, []string{o.Label}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: o.Prefix + "_active_workers", Help: "Workers syncing a " + o.Item + " right now, by " + o.Label + ".",
		}, []string{o.Label}),
	}
	if reg != nil {
		reg.MustRegister(m.syncs, m.duration, m.panics, m.active)
	}
	return m
}

// start counts an active worker of loop name; the function it returns ends the
// processing with its result label and error.
func (m *Metrics) start(name string) func(result string, err error) {
	if m == nil {
		return func(string, error) {}
	}
	begin := time.Now()
	active := m.active.WithLabelValues(name)
	active.Inc()
	return func(result string, err error) {
		active.Dec()
		if _, ok := err.(*Panic); ok {
			m.panics.WithLabelValues(name).Inc()
		}
		m.syncs.WithLabelValues(name, result).Inc()
		m.duration.WithLabelValues(name).Observe(time.Since(begin).Seconds())
	}
}

// Forget drops the series of a loop that is gone for good.
func (m *Metrics) Forget(name string) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{m.label: name}
	m.syncs.DeletePartialMatch(labels)
	m.duration.DeletePartialMatch(labels)
	m.panics.DeletePartialMatch(labels)
	m.active.DeletePartialMatch(labels)
}
