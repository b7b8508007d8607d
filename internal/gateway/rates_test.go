package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
)

// TestCallRatesCountTheLastWindow: calls and failures of the last five minutes count,
// older ones drop out as the ring turns.
func TestCallRatesCountTheLastWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newCallRates(func() time.Time { return now })
	for range 10 {
		r.observe(false)
	}
	now = now.Add(2 * time.Minute)
	for range 5 {
		r.observe(true)
	}
	want := dashboard.Rates{CallsPerMinute: 3, ErrorsPerMinute: 1, Window: rateWindow}
	if diff := cmp.Diff(want, r.perMinute()); diff != "" {
		t.Errorf("after 15 calls, 5 failed (-want +got):\n%s", diff)
	}
	now = now.Add(4 * time.Minute) // the first ten are past the window
	want = dashboard.Rates{CallsPerMinute: 1, ErrorsPerMinute: 1, Window: rateWindow}
	if diff := cmp.Diff(want, r.perMinute()); diff != "" {
		t.Errorf("six minutes later (-want +got):\n%s", diff)
	}
	now = now.Add(rateWindow)
	if got := r.perMinute(); got.CallsPerMinute != 0 || got.ErrorsPerMinute != 0 {
		t.Errorf("after the window: %+v", got)
	}
}
