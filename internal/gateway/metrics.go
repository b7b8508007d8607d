package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalambda/metalambda/internal/runtime"
)

// metrics use the names FaaS users already graph (OpenFaaS gateway).
type metrics struct {
	invocations *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, stats func() map[string]runtime.PoolStats) *metrics {
	m := &metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_function_invocation_total", Help: "Function calls by function and HTTP status code.",
		}, []string{"function_name", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_functions_seconds", Help: "Function call duration.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"function_name"}),
	}
	if reg != nil {
		reg.MustRegister(m.invocations, m.seconds, &poolCollector{stats: stats, desc: prometheus.NewDesc(
			"gateway_runtime_pool_workers", "Pooled VMs or worker processes per runtime, idle or busy.", []string{"runtime", "state"}, nil)})
	}
	return m
}

// functionMetrics are one function's series, looked up once when it is loaded.
type functionMetrics struct {
	m        *metrics
	name     string // function_name: "name.namespace", as OpenFaaS names it
	ok       prometheus.Counter
	duration prometheus.Observer
	rates    *callRates
}

func (m *metrics) forFunction(namespace, name string) *functionMetrics {
	fn := name + "." + namespace
	return &functionMetrics{m: m, name: fn, ok: m.invocations.WithLabelValues(fn, "200"), duration: m.seconds.WithLabelValues(fn), rates: newCallRates(time.Now)}
}

func (f *functionMetrics) observe(code int, d time.Duration) {
	if code == 200 {
		f.ok.Inc()
	} else {
		f.m.invocations.WithLabelValues(f.name, strconv.Itoa(code)).Inc()
	}
	f.duration.Observe(d.Seconds())
	f.rates.observe(code != 200)
}

// remove drops the function's series, once the function is deleted.
func (f *functionMetrics) remove() {
	f.m.invocations.DeletePartialMatch(prometheus.Labels{"function_name": f.name})
	f.m.seconds.DeleteLabelValues(f.name)
}

type poolCollector struct {
	stats func() map[string]runtime.PoolStats
	desc  *prometheus.Desc
}

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range p.stats() {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(s.Idle), name, "idle")
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(s.Busy), name, "busy")
	}
}
