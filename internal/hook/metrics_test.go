package hook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalambda/metalambda/internal/hookapi"
)

func TestMetricsCountCalls(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	c := &Client{Metrics: m}
	ctx := context.Background()
	sync := CallInfo{Controller: "ctl", Hook: HookSync}

	var inFlightDuringCall float64
	ok := serve(t, func(w http.ResponseWriter, r *http.Request) {
		inFlightDuringCall = testutil.ToFloat64(m.inFlight.WithLabelValues("ctl", HookSync))
		_, _ = w.Write([]byte(`{}`))
	})
	_ = c.Call(ctx, ok, sync, nil, &hookapi.CompositeResponse{})
	_ = c.Call(ctx, serve(t, answer(http.StatusOK, "{}")), CallInfo{Controller: "ctl", Hook: HookCustomize}, nil, &hookapi.CustomizeResponse{})
	_ = c.Call(ctx, serve(t, answer(http.StatusInternalServerError, "boom")), sync, nil, nil)
	stuck := serveStuck(t, "")
	stuck.Timeout = 50 * time.Millisecond
	_ = c.Call(ctx, stuck, sync, nil, nil)
	_ = c.Call(ctx, closedEndpoint(), sync, nil, nil)

	if inFlightDuringCall != 1 {
		t.Errorf("in-flight during a call = %v, want 1", inFlightDuringCall)
	}
	want := `
# HELP metalambda_hook_requests_total Hook calls by controller, hook and result code (HTTP status, timeout or error).
# TYPE metalambda_hook_requests_total counter
metalambda_hook_requests_total{code="200",controller="ctl",hook="customize"} 1
metalambda_hook_requests_total{code="200",controller="ctl",hook="sync"} 1
metalambda_hook_requests_total{code="500",controller="ctl",hook="sync"} 1
metalambda_hook_requests_total{code="error",controller="ctl",hook="sync"} 1
metalambda_hook_requests_total{code="timeout",controller="ctl",hook="sync"} 1
# HELP metalambda_hook_in_flight_requests Hook calls under way.
# TYPE metalambda_hook_in_flight_requests gauge
metalambda_hook_in_flight_requests{controller="ctl",hook="customize"} 0
metalambda_hook_in_flight_requests{controller="ctl",hook="sync"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"metalambda_hook_requests_total", "metalambda_hook_in_flight_requests"); err != nil {
		t.Error(err)
	}
	if got := histogramCount(t, reg, "sync"); got != 4 {
		t.Errorf("sync duration samples = %d, want 4", got)
	}
}

// closedEndpoint is an endpoint whose server is gone.
func closedEndpoint() Endpoint {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return Endpoint{URL: srv.URL + "/sync", Timeout: 10 * time.Second}
}

// histogramCount is the sample count of the duration histogram for hook.
func histogramCount(t *testing.T, reg prometheus.Gatherer, hook string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "metalambda_hook_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hook" && l.GetValue() == hook {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func TestNewMetricsTwiceSharesCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.start(CallInfo{"ctl", HookSync})("200")
	b.start(CallInfo{"ctl", HookSync})("200")
	if got := testutil.ToFloat64(a.requests.WithLabelValues("ctl", HookSync, "200")); got != 2 {
		t.Errorf("requests = %v, want 2", got)
	}
}

func TestMetricsForget(t *testing.T) {
	m := NewMetrics(nil)
	m.start(CallInfo{"gone", HookSync})("200")
	m.start(CallInfo{"kept", HookSync})("200")
	m.Forget("gone")
	if got := testutil.CollectAndCount(m.requests); got != 1 {
		t.Errorf("request series after Forget = %d, want 1", got)
	}
	if got := testutil.CollectAndCount(m.duration); got != 1 {
		t.Errorf("duration series after Forget = %d, want 1", got)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.start(CallInfo{"ctl", HookSync})("200")
	m.Forget("ctl")
}
