package pythonlambda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/functions/internal/golden"
	"github.com/metalambda/metalambda/internal/hookapi"
	localingress "github.com/metalambda/metalambda/internal/local/ingress"
)

func withScaleToZero(idleSeconds int) parentOpt {
	return withSpec("scaleToZero", map[string]any{"idleSeconds": idleSeconds})
}

func withDemand(at string) parentOpt {
	return func(obj hookapi.Object) {
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{LastDemandAnnotation: at}
	}
}

// TestSyncScaleToZero follows a lambda with spec.scaleToZero through its idle
// periods: the golden responses hold the children, the wake-target annotation of the
// Ingress and the resync delay.
func TestSyncScaleToZero(t *testing.T) {
	tests := []struct {
		name     string
		parent   hookapi.Object
		children []string
		resync   float64
		reason   string
		message  string
	}{{
		name:     "scale-to-zero-busy",
		parent:   parent(withScaleToZero(30), withDemand(now.Add(-10*time.Second).Format(time.RFC3339Nano))),
		children: demoChildren(demoPods), resync: 20, reason: ReasonAllPodsReady, message: "2 of 2 pods are ready",
	}, {
		name:     "scale-to-zero-idle",
		parent:   parent(withScaleToZero(30), withDemand(now.Add(-30*time.Second).Format(time.RFC3339Nano))),
		children: demoChildren(""), reason: ReasonScaledToZero,
		message: "no request for 30s (spec.scaleToZero.idleSeconds): no pod runs until the ingress holds one",
	}, {
		name:     "scale-to-zero-woken",
		parent:   parent(withScaleToZero(30), withDemand(now.Add(-1500*time.Millisecond).Format(time.RFC3339Nano))),
		children: demoChildren(demoPods), resync: 28.5, reason: ReasonAllPodsReady, message: "2 of 2 pods are ready",
	}, {
		// Without the annotation the creation time counts: long ago for the fixture.
		name:     "scale-to-zero-never-requested",
		parent:   parent(withScaleToZero(30)),
		children: demoChildren(""), reason: ReasonScaledToZero,
		message: "no request for 30s (spec.scaleToZero.idleSeconds): no pod runs until the ingress holds one",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := golden.Request(t, tt.name+".request.json", &hookapi.CompositeRequest{Parent: tt.parent, Children: observedOf(t, parent(), false, allReady)})
			resp, err := syncAt(req, now)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			golden.Compare(t, tt.name+".response.json", resp)
			got := summarize(t, resp, tt.message)
			if diff := cmp.Diff(tt.children, got.Children); diff != "" {
				t.Errorf("children (-want +got):\n%s", diff)
			}
			if resp.ResyncAfterSeconds != tt.resync || got.Reason != tt.reason || got.Message != tt.message {
				t.Errorf("resync %v, reason %s, message %q; want %v, %s, %q", resp.ResyncAfterSeconds, got.Reason, got.Message, tt.resync, tt.reason, tt.message)
			}
			ing := resp.Children[2]["metadata"].(map[string]any)["annotations"].(map[string]any)
			if ing[WakeTargetAnnotation] != "pythonlambdas.v1.example.com/demo-python-lambda" {
				t.Errorf("Ingress annotations = %v", ing)
			}
		})
	}
}

// A lambda without scaleToZero keeps its pods however old its last demand, and its
// Ingress names no wake target.
func TestSyncWithoutScaleToZeroIgnoresDemand(t *testing.T) {
	resp, err := syncAt(&hookapi.CompositeRequest{Parent: parent(withDemand("2000-01-01T00:00:00Z"))}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := summarize(t, resp, "").Children; !cmp.Equal(got, demoChildren(demoPods)) {
		t.Errorf("children = %v", got)
	}
	if _, ok := resp.Children[2]["metadata"].(map[string]any)["annotations"]; ok || resp.ResyncAfterSeconds != 0 {
		t.Errorf("Ingress %v, resync %v: want no annotations and no resync", resp.Children[2]["metadata"], resp.ResyncAfterSeconds)
	}
}

func TestSyncScaleToZeroRefusesBadInput(t *testing.T) {
	tests := []struct {
		parent hookapi.Object
		want   string
	}{
		{parent(withScaleToZero(2)), "spec.scaleToZero.idleSeconds is 2, less than 5"},
		{parent(withScaleToZero(30), withDemand("yesterday")), `annotation metalambda.dev/last-demand "yesterday" is not an RFC 3339 time`},
	}
	for _, tt := range tests {
		_, err := syncAt(&hookapi.CompositeRequest{Parent: tt.parent}, now)
		if !errors.Is(err, ErrInvalidParent) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error = %v, want ErrInvalidParent with %q", err, tt.want)
		}
	}
}

func TestIdleness(t *testing.T) {
	s := &scaleToZero{IdleSeconds: 10}
	tests := []struct {
		s      *scaleToZero
		since  time.Duration
		idle   bool
		resync float64
	}{
		{nil, time.Hour, false, 0},
		{s, 0, false, 10},
		{s, 9*time.Second + 950*time.Millisecond, false, 0.1},
		{s, 10 * time.Second, true, 0},
		{s, -5 * time.Second, false, 15}, // a demand time ahead of this clock
	}
	for _, tt := range tests {
		idle, resync := idleness(tt.s, now.Add(-tt.since), now)
		if idle != tt.idle || resync != tt.resync {
			t.Errorf("idleness(%v, %v ago) = %v, %v; want %v, %v", tt.s, tt.since, idle, resync, tt.idle, tt.resync)
		}
	}
}

// The hook and the local ingress agree on the annotations.
func TestAnnotationsMatchTheIngress(t *testing.T) {
	if WakeTargetAnnotation != localingress.WakeTargetAnnotation || LastDemandAnnotation != localingress.LastDemandAnnotation {
		t.Errorf("hook %s, %s; ingress %s, %s", WakeTargetAnnotation, LastDemandAnnotation, localingress.WakeTargetAnnotation, localingress.LastDemandAnnotation)
	}
}
