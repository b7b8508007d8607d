package engine

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseLoopSettings(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        loopSettings
		problems    []string // parts of the problems, in order
	}{
		{"none", nil, loopSettings{}, nil},
		{"one at a time", map[string]string{AnnotationMaxConcurrentSyncs: "1"}, loopSettings{maxConcurrent: 1}, nil},
		{"backoff", map[string]string{AnnotationSyncBackoffBase: "2s", AnnotationSyncBackoffMax: "5m"}, loopSettings{backoffBase: 2 * time.Second, backoffMax: 5 * time.Minute}, nil},
		{"base alone", map[string]string{AnnotationSyncBackoffBase: "500ms"}, loopSettings{backoffBase: 500 * time.Millisecond}, nil},
		{"zero syncs", map[string]string{AnnotationMaxConcurrentSyncs: "0"}, loopSettings{},
			[]string{`max-concurrent-syncs: "0" is not a positive integer; the engine's --workers applies`}},
		{"not a number", map[string]string{AnnotationMaxConcurrentSyncs: "one"}, loopSettings{}, []string{`"one" is not a positive integer`}},
		{"seconds without a unit", map[string]string{AnnotationSyncBackoffBase: "2", AnnotationSyncBackoffMax: "1m"}, loopSettings{backoffMax: time.Minute},
			[]string{`sync-backoff-base: "2" is not a positive duration such as "2s" or "5m"; the engine's 5ms applies`}},
		{"negative max", map[string]string{AnnotationSyncBackoffMax: "-1s"}, loopSettings{}, []string{`sync-backoff-max: "-1s" is not a positive duration`}},
		{"max below base", map[string]string{AnnotationSyncBackoffBase: "1m", AnnotationSyncBackoffMax: "1s"}, loopSettings{},
			[]string{"sync-backoff-max (1s) is less than metalambda.dev/sync-backoff-base (1m0s); the engine's backoff applies"}},
		{"base above the default max", map[string]string{AnnotationSyncBackoffBase: "1h"}, loopSettings{},
			[]string{"sync-backoff-max (16m40s) is less than"}},
		{"one bad of two", map[string]string{AnnotationMaxConcurrentSyncs: "-3", AnnotationSyncBackoffBase: "1s"}, loopSettings{backoffBase: time.Second},
			[]string{"max-concurrent-syncs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := parseLoopSettings(tt.annotations)
			if got != tt.want {
				t.Errorf("settings = %+v, want %+v", got, tt.want)
			}
			if len(problems) != len(tt.problems) {
				t.Fatalf("problems = %q, want %d", problems, len(tt.problems))
			}
			for i, p := range problems {
				if !strings.Contains(p, tt.problems[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p, tt.problems[i])
				}
			}
		})
	}
}

func TestLoopSettingsWorkersAndBackoff(t *testing.T) {
	if got := (loopSettings{}).workers(16); got != 16 {
		t.Errorf("no cap: %d workers, want 16", got)
	}
	if got := (loopSettings{maxConcurrent: 1}).workers(16); got != 1 {
		t.Errorf("cap 1: %d workers, want 1", got)
	}
	if got := (loopSettings{maxConcurrent: 100}).workers(16); got != 16 {
		t.Errorf("cap above --workers: %d workers, want 16", got)
	}
	key := parentKey{name: "p"}
	limiter := (loopSettings{backoffBase: 2 * time.Second, backoffMax: 5 * time.Second}).rateLimiter()
	var delays []time.Duration
	for range 4 {
		delays = append(delays, limiter.When(key))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays = %v, want %v", delays, want)
		}
	}
	limiter.Forget(key)
	if d := limiter.When(key); d != 2*time.Second {
		t.Errorf("after Forget: %s, want the base again", d)
	}
	if d := (loopSettings{}).rateLimiter().When(key); d != defaultBackoffBase {
		t.Errorf("default backoff starts at %s, want %s", d, defaultBackoffBase)
	}
}

func TestSpecHashFollowsLoopAnnotations(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"a": "b"}}}
	before := specHash(obj)
	obj.SetAnnotations(map[string]string{"example.com/other": "x"})
	if specHash(obj) != before {
		t.Error("an unrelated annotation changed the hash")
	}
	obj.SetAnnotations(map[string]string{AnnotationMaxConcurrentSyncs: "1"})
	if specHash(obj) == before {
		t.Error("a loop annotation left the hash unchanged: the controller would not be rebuilt")
	}
}
