package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalambda/metalambda/internal/runtime"
)

// TestDeletedFunctionsLeaveNoSeries: a removed function's counters and histogram go,
// another function's stay.
func TestDeletedFunctionsLeaveNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, func() map[string]runtime.PoolStats { return nil })
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
