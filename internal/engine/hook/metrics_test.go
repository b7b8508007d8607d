package hook

import (
	"context"
	"fmt"
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
	a.start(CallInfo{Controller: "ctl", Hook: HookSync}, "http://hook")("200")
	b.start(CallInfo{Controller: "ctl", Hook: HookSync}, "http://hook")("200")
	if got := testutil.ToFloat64(a.requests.WithLabelValues("ctl", HookSync, "200")); got != 2 {
		t.Errorf("requests = %v, want 2", got)
	}
}

func TestMetricsForget(t *testing.T) {
	m := NewMetrics(nil)
	m.start(CallInfo{Controller: "gone", Hook: HookSync}, "http://hook")("200")
	m.start(CallInfo{Controller: "kept", Hook: HookSync}, "http://hook")("200")
	m.Forget("", "gone")
	if got := testutil.CollectAndCount(m.requests); got != 1 {
		t.Errorf("request series after Forget = %d, want 1", got)
	}
	if got := testutil.CollectAndCount(m.duration); got != 1 {
		t.Errorf("duration series after Forget = %d, want 1", got)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.start(CallInfo{Controller: "ctl", Hook: HookSync}, "http://hook")("200")
	m.Forget("", "ctl")
}

// TestUpstreamMetricNames checks the series served under Metacontroller's names: one
// family per hook with its url, controller_name and controller_type labels, counting
// only calls that got an HTTP answer, as Metacontroller's instrumented client does.
func TestUpstreamMetricNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := &Client{Metrics: NewMetrics(reg)}
	ctx := context.Background()
	ok, fail := serve(t, answer(http.StatusOK, "{}")), serve(t, answer(http.StatusInternalServerError, "boom"))
	sync := CallInfo{Controller: "ctl", ControllerType: "CompositeController", Hook: HookSync}
	customize := CallInfo{Controller: "dec", ControllerType: "DecoratorController", Hook: HookCustomize}
	_ = c.Call(ctx, ok, sync, nil, &hookapi.CompositeResponse{})
	_ = c.Call(ctx, ok, sync, nil, &hookapi.CompositeResponse{})
	_ = c.Call(ctx, fail, sync, nil, nil)
	_ = c.Call(ctx, closedEndpoint(), sync, nil, nil) // no HTTP answer: in flight only
	_ = c.Call(ctx, ok, customize, nil, &hookapi.CustomizeResponse{})

	want := fmt.Sprintf(`
# HELP metacontroller_sync_requests_total A counter for outgoing requests from the wrapped client.
# TYPE metacontroller_sync_requests_total counter
metacontroller_sync_requests_total{code="200",controller_name="ctl",controller_type="CompositeController",method="post",url="%[1]s"} 2
metacontroller_sync_requests_total{code="500",controller_name="ctl",controller_type="CompositeController",method="post",url="%[2]s"} 1
# HELP metacontroller_customize_requests_total A counter for outgoing requests from the wrapped client.
# TYPE metacontroller_customize_requests_total counter
metacontroller_customize_requests_total{code="200",controller_name="dec",controller_type="DecoratorController",method="post",url="%[1]s"} 1
# HELP metacontroller_customize_in_flight_requests A gauge of in-flight outgoing requests for the wrapped client.
# TYPE metacontroller_customize_in_flight_requests gauge
metacontroller_customize_in_flight_requests{controller_name="dec",controller_type="DecoratorController",url="%[1]s"} 0
`, ok.URL, fail.URL)
	names := []string{"metacontroller_sync_requests_total", "metacontroller_customize_requests_total",
		"metacontroller_customize_in_flight_requests", "metacontroller_finalize_requests_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(c.Metrics.upstream[HookSync].inFlight); got != 3 {
		t.Errorf("sync in-flight series = %d, want 3 (one per URL)", got)
	}
	if got := seriesCount(t, reg, "metacontroller_sync_request_duration_histogram_seconds"); got != 2 {
		t.Errorf("sync duration series = %d, want 2 (URLs that answered)", got)
	}
}

func seriesCount(t *testing.T, reg prometheus.Gatherer, name string) int {
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

// TestUpstreamSeriesArePruned checks that a rebuilt controller keeps only the series
// of the URLs its hooks call now, and that a deleted one leaves none.
func TestUpstreamSeriesArePruned(t *testing.T) {
	m := NewMetrics(nil)
	record := func(kind, name, hook, url string) {
		m.start(CallInfo{Controller: name, ControllerType: kind, Hook: hook}, url)("200")
	}
	record("CompositeController", "a", HookSync, "http://old/sync")
	record("CompositeController", "a", HookSync, "http://new/sync")
	record("CompositeController", "a", HookFinalize, "http://new/finalize")
	record("DecoratorController", "a", HookSync, "http://old/sync")
	record("CompositeController", "b", HookSync, "http://old/sync")

	m.Prune("CompositeController", "a", map[string]string{HookSync: "http://new/sync"})
	count := func(hook string) int { return testutil.CollectAndCount(m.upstream[hook].requests) }
	if got := count(HookSync); got != 3 {
		t.Errorf("sync series after Prune = %d, want 3 (a's new URL, the decorator a, b)", got)
	}
	if got := count(HookFinalize); got != 0 {
		t.Errorf("finalize series after Prune = %d, want 0 (a has no finalize hook now)", got)
	}
	m.Forget("CompositeController", "a")
	if got := count(HookSync); got != 2 {
		t.Errorf("sync series after Forget = %d, want 2 (the decorator a, b)", got)
	}
	if got := len(m.series); got != 2 {
		t.Errorf("tracked series = %d, want 2", got)
	}
}
