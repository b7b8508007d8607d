package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestDeletedFunctionsLeaveNoSeries: a removed function's counters and histogram go,
// another function's stay.
func TestDeletedFunctionsLeaveNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, func() map[string]lambda.PoolStats { return nil }, nil)
	gone, kept := m.forFunction("ns", "gone"), m.forFunction("ns", "kept")
	for _, f := range []*functionMetrics{gone, kept} {
		f.observe(200, time.Millisecond)
		f.observe(500, time.Millisecond)
	}
	if got := series(t, reg, "gone.ns"); got != 3 {
		t.Fatalf("the function has %d series before removal, want 3", got)
	}
	gone.remove()
	if got := series(t, reg, "gone.ns"); got != 0 {
		t.Errorf("%d series of the removed function remain", got)
	}
	if got := series(t, reg, "kept.ns"); got != 3 {
		t.Errorf("the kept function has %d series, want 3 (two codes and the histogram)", got)
	}
}

// series counts the metric series whose function_name is fn.
func series(t *testing.T, reg *prometheus.Registry, fn string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range families {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "function_name" && l.GetValue() == fn {
					n++
				}
			}
		}
	}
	return n
}

// The runtimes' worker counts, cold starts, stops and the memory budget are
// exported under the names docs/gateway.md gives.
func TestWorkerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	budget := lambda.NewMemoryBudget(3 << 30)
	newMetrics(reg, func() map[string]lambda.PoolStats {
		return map[string]lambda.PoolStats{"python": {Idle: 2, Busy: 1, Spares: 2, Starts: 7, Evictions: 3, Reaps: 2, SpareMisses: 1}}
	}, budget)
	want := `
# HELP gateway_runtime_worker_memory_budget_bytes The memory budget of all worker processes (--worker-memory-budget); absent without one.
# TYPE gateway_runtime_worker_memory_budget_bytes gauge
gateway_runtime_worker_memory_budget_bytes 3.221225472e+09
# HELP gateway_runtime_worker_spare_misses_total Cold starts per runtime that found no spare and started a worker on the call.
# TYPE gateway_runtime_worker_spare_misses_total counter
gateway_runtime_worker_spare_misses_total{runtime="python"} 1
# HELP gateway_runtime_worker_starts_total Workers given a function per runtime: each is a cold start, a spare loading the function or a worker started for it.
# TYPE gateway_runtime_worker_starts_total counter
gateway_runtime_worker_starts_total{runtime="python"} 7
# HELP gateway_runtime_worker_stops_total Idle worker processes stopped per runtime: reason memory to keep --worker-memory-budget, idle when idle past --worker-idle-timeout or busy while idle.
# TYPE gateway_runtime_worker_stops_total counter
gateway_runtime_worker_stops_total{reason="idle",runtime="python"} 2
gateway_runtime_worker_stops_total{reason="memory",runtime="python"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gateway_runtime_worker_starts_total", "gateway_runtime_worker_spare_misses_total", "gateway_runtime_worker_stops_total", "gateway_runtime_worker_memory_budget_bytes"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "gateway_runtime_pool_workers"); err != nil || n != 3 {
		t.Errorf("gateway_runtime_pool_workers: %d series (%v), want idle, busy and spare", n, err)
	}
}
