package main

import (
	"slices"
	"testing"
	"time"
)

func TestParseSample(t *testing.T) {
	for _, tt := range []struct {
		line, name string
		labels     map[string]string
		value      float64
		ok         bool
	}{
		{`metalambda_engine_syncs_total{controller="soak-controller",result="error"} 3`, "metalambda_engine_syncs_total", map[string]string{"controller": "soak-controller", "result": "error"}, 3, true},
		{`leader_election_master_status{name="metacontroller"} 1`, "leader_election_master_status", map[string]string{"name": "metacontroller"}, 1, true},
		{`go_goroutines 42`, "go_goroutines", map[string]string{}, 42, true},
		{`# HELP go_goroutines Number of goroutines.`, "", nil, 0, false},
		{`broken{a="b"} x`, "", nil, 0, false},
	} {
		name, labels, value, ok := parseSample(tt.line)
		if name != tt.name || value != tt.value || ok != tt.ok || len(labels) != len(tt.labels) {
			t.Errorf("parseSample(%q) = %q %v %v %v", tt.line, name, labels, value, ok)
		}
		for k, v := range tt.labels {
			if labels[k] != v {
				t.Errorf("parseSample(%q): label %s = %q, want %q", tt.line, k, labels[k], v)
			}
		}
	}
}

// The signs are hook calls without a 200 and syncs neither failed nor done; a
// failed or done sync, a 200 and a 304 are none.
func TestSignCounter(t *testing.T) {
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"metalambda_hook_requests_total", map[string]string{"code": "503"}, "hook 503"},
		{"metalambda_hook_requests_total", map[string]string{"code": "error"}, "hook error"},
		{"metalambda_hook_requests_total", map[string]string{"code": "200"}, ""},
		{"metalambda_hook_requests_total", map[string]string{"code": "304"}, ""},
		{"metalambda_engine_syncs_total", map[string]string{"result": "conflict"}, "sync conflict"},
		{"metalambda_engine_syncs_total", map[string]string{"result": "error"}, ""},
		{"metalambda_engine_syncs_total", map[string]string{"result": "success"}, ""},
		{"metalambda_engine_api_requests_total", map[string]string{"code": "409"}, ""},
	} {
		if got := signCounter(tt.name, tt.labels); got != tt.want {
			t.Errorf("signCounter(%s %v) = %q, want %q", tt.name, tt.labels, got, tt.want)
		}
	}
}

func TestAttribution(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := []window{
		{kind: faultGateway, target: -1, start: t0, recovered: t0.Add(10 * time.Second)},
		{kind: faultLambda, target: 3, start: t0.Add(time.Minute), recovered: t0.Add(70 * time.Second)},
	}
	for _, tt := range []struct {
		at    time.Duration
		kinds []string
	}{
		{-time.Second, []string{"none"}},
		{0, []string{faultGateway}},
		{10*time.Second + windowTail, []string{faultGateway}}, // the tail counts
		{10*time.Second + windowTail + time.Millisecond, []string{"none"}},
		{65 * time.Second, []string{faultLambda}},
	} {
		if got := kindsAt(ws, t0.Add(tt.at)); !slices.Equal(got, tt.kinds) {
			t.Errorf("kindsAt(+%s) = %v, want %v", tt.at, got, tt.kinds)
		}
	}
	// Only the lambda whose pod was killed is excused, and only in its window.
	if !ownPodKilled(ws, request{at: t0.Add(65 * time.Second), target: 3}) {
		t.Error("a request to the killed lambda in its window is not excused")
	}
	if ownPodKilled(ws, request{at: t0.Add(65 * time.Second), target: 4}) || ownPodKilled(ws, request{at: t0.Add(5 * time.Second), target: 3}) {
		t.Error("a request to another lambda, or in another fault's window, is excused")
	}
}

func TestMissed(t *testing.T) {
	good := Report{LambdaRequests: 10000, LambdaFailed: 10, SyncErrors: map[string]float64{faultNode: 5}}
	if m := good.Missed(); len(m) != 0 {
		t.Errorf("a run that met every target missed %v", m)
	}
	bad := good
	bad.LambdaFailed, bad.NoopWrites, bad.Unreflected = 11, 2, 1
	bad.SyncErrors = map[string]float64{faultGateway: 1}
	bad.Lost = []string{"p001"}
	if m := bad.Missed(); len(m) != 5 {
		t.Errorf("missed %d targets, want 5 (success, no-op writes, convergence, gateway syncs, lost): %v", len(m), m)
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	if q := quantile(ds, 0.99); q != 99*time.Second {
		t.Errorf("p99 of 1..100 s = %s", q)
	}
	if q := quantile(ds, 1); q != 100*time.Second {
		t.Errorf("max of 1..100 s = %s", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("quantile of nothing = %s", q)
	}
}
