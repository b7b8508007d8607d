//go:build integration

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestMain lets the local node's sandboxes start this test binary again as their
// launcher.
func TestMain(m *testing.M) {
	lambda.ServeWorker()
	os.Exit(m.Run())
}

// TestSoak is make soak's short form: two minutes of load with a fault every two
// seconds on average after the previous one's window (each kind once per round, in a
// random order), then the targets of docs/reliability.md.
func TestSoak(t *testing.T) {
	cfg := Defaults()
	cfg.Duration, cfg.FaultInterval = 2*time.Minute, 2*time.Second
	cfg.ChartDir = "../../deploy/helm/metalambda"
	cfg.Bridge, cfg.PodCIDR = "mlsoak1", "10.244.237.0/24"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, testLog{t})
	if rep != nil {
		var out strings.Builder
		rep.Print(&out)
		t.Log(out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Faults) < len(allFaults) {
		t.Errorf("%d faults injected, want each of the %d kinds", len(rep.Faults), len(allFaults))
	}
	for _, m := range rep.Missed() {
		t.Error(m)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
