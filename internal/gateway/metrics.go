package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/workloop"
)

// metrics use the names FaaS users already graph (OpenFaaS gateway).
type metrics struct {
	invocations *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	// store are the work loop's series of the Function store (metalambda_gateway_
	// function_syncs_total, _sync_duration_seconds, _sync_panics_total and
	// _active_workers, labelled queue="functions"): no FaaS gateway has such series,
	// so they carry the project's prefix.
	store *workloop.Metrics
}

func newMetrics(reg prometheus.Registerer, stats func() map[string]lambda.PoolStats, budget *lambda.MemoryBudget) *metrics {
	m := &metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_function_invocation_total", Help: "Function calls by function and HTTP status code.",
		}, []string{"function_name", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_functions_seconds", Help: "Function call duration.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"function_name"}),
		store: workloop.NewMetrics(reg, workloop.MetricsOptions{Prefix: "metalambda_gateway_function", Label: "queue", Item: "function"}),
	}
	if reg != nil {
		reg.MustRegister(m.invocations, m.seconds, newPoolCollector(stats, budget))
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
	stats                                          func() map[string]lambda.PoolStats
	budget                                         *lambda.MemoryBudget
	workers, starts, stops, budgetBytes, usedBytes *prometheus.Desc
	spareMisses                                    *prometheus.Desc
}

func newPoolCollector(stats func() map[string]lambda.PoolStats, budget *lambda.MemoryBudget) *poolCollector {
	return &poolCollector{
		stats: stats, budget: budget,
		workers:     prometheus.NewDesc("gateway_runtime_pool_workers", "Pooled VMs or worker processes per runtime: idle or busy, or spare (started ahead, not given a function yet).", []string{"runtime", "state"}, nil),
		starts:      prometheus.NewDesc("gateway_runtime_worker_starts_total", "Workers given a function per runtime: each is a cold start, a spare loading the function or a worker started for it.", []string{"runtime"}, nil),
		spareMisses: prometheus.NewDesc("gateway_runtime_worker_spare_misses_total", "Cold starts per runtime that found no spare and started a worker on the call.", []string{"runtime"}, nil),
		stops: prometheus.NewDesc("gateway_runtime_worker_stops_total", "Idle worker processes stopped per runtime: reason memory to keep --worker-memory-budget, idle when idle past --worker-idle-timeout or busy while idle.",
			[]string{"runtime", "reason"}, nil),
		budgetBytes: prometheus.NewDesc("gateway_runtime_worker_memory_budget_bytes", "The memory budget of all worker processes (--worker-memory-budget); absent without one.", nil, nil),
		usedBytes:   prometheus.NewDesc("gateway_runtime_worker_memory_bytes", "Memory of all worker processes and zygotes (Python's and the script zygotes) at the budget's last look (every second and before each start).", nil, nil),
	}
}

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.workers, p.starts, p.stops, p.budgetBytes, p.usedBytes, p.spareMisses} {
		ch <- d
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range p.stats() {
		ch <- prometheus.MustNewConstMetric(p.workers, prometheus.GaugeValue, float64(s.Idle), name, "idle")
		ch <- prometheus.MustNewConstMetric(p.workers, prometheus.GaugeValue, float64(s.Busy), name, "busy")
		ch <- prometheus.MustNewConstMetric(p.workers, prometheus.GaugeValue, float64(s.Spares), name, "spare")
		ch <- prometheus.MustNewConstMetric(p.starts, prometheus.CounterValue, float64(s.Starts), name)
		ch <- prometheus.MustNewConstMetric(p.spareMisses, prometheus.CounterValue, float64(s.SpareMisses), name)
		ch <- prometheus.MustNewConstMetric(p.stops, prometheus.CounterValue, float64(s.Evictions), name, "memory")
		ch <- prometheus.MustNewConstMetric(p.stops, prometheus.CounterValue, float64(s.Reaps), name, "idle")
	}
	if p.budget != nil {
		ch <- prometheus.MustNewConstMetric(p.budgetBytes, prometheus.GaugeValue, float64(p.budget.Limit()))
		ch <- prometheus.MustNewConstMetric(p.usedBytes, prometheus.GaugeValue, float64(p.budget.Used()))
	}
}
