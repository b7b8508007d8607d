package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/engine/leader"
	"github.com/metalambda/metalambda/internal/logging"
)

// parse binds the engine's flags to fresh options and parses args.
func parse(t *testing.T, args ...string) (*options, *flag.FlagSet, error) {
	t.Helper()
	o := defaultOptions()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, fs, err
	}
	return o, fs, o.validate()
}

// upstreamFlags is every flag of upstream Metacontroller's --help: those of
// pkg/cmd/metacontroller/main.go, controller-runtime's --zap-* flags and --kubeconfig,
// each with a realistic value and what it must set.
var upstreamFlags = []struct {
	arg  string
	got  func(*options) any
	want any
}{
	{"--discovery-interval=20s", func(o *options) any { return o.engine.DiscoveryInterval }, 20 * time.Second},
	{"--cache-flush-interval=10m", func(o *options) any { return o.engine.CacheFlushInterval }, 10 * time.Minute},
	{"--metrics-address=:9998", func(o *options) any { return o.metricsAddress }, ":9998"},
	{"--client-go-qps=100", func(o *options) any { return o.qps }, 100.0},
	{"--client-go-burst=200", func(o *options) any { return o.burst }, 200},
	{"--client-go-burst=200", func(o *options) any { return o.explicitRate }, true},
	{"--workers=100", func(o *options) any { return o.engine.Workers }, 100},
	{"--events-qps=0.0033", func(o *options) any { return o.engine.EventsQPS }, 0.0033},
	{"--events-burst=30", func(o *options) any { return o.engine.EventsBurst }, 30},
	{"--pprof-address=:6060", func(o *options) any { return o.pprofAddress }, ":6060"},
	{"--health-probe-bind-address=:8082", func(o *options) any { return o.healthProbeAddress }, ":8082"},
	{"--target-label-selector=controller-group=cicd", func(o *options) any { return o.engine.TargetSelector.String() }, "controller-group=cicd"},
	{"--apply-strategy=dynamic-apply", func(o *options) any { return o.engine.ApplyStrategy }, engine.ThreeWay},
	{"--apply-strategy-ssa-field-manager=metacontroller", func(o *options) any { return o.engine.FieldManager }, "metacontroller"},
	{"--kubeconfig=/etc/metacontroller/kubeconfig", func(o *options) any { return o.kubeconfig }, "/etc/metacontroller/kubeconfig"},
	{"--zap-devel", func(o *options) any { return o.logConfig },
		logging.Config{Verbosity: 1, MinLevel: -1, Stacktrace: slog.LevelError, TimeEncoding: "rfc3339"}},
	{"--zap-encoder=json", func(o *options) any { return o.logConfig.JSON }, true},
	{"--zap-log-level=5", func(o *options) any { return [2]any{o.logConfig.Verbosity, o.logConfig.MinLevel} }, [2]any{5, slog.Level(-5)}},
	{"--zap-stacktrace-level=info", func(o *options) any { return o.logConfig.Stacktrace }, slog.LevelInfo},
	{"--zap-time-encoding=iso8601", func(o *options) any { return o.logConfig.TimeEncoding }, "iso8601"},
}

// leaderElectionFlags are upstream's leader election flags; outside a cluster the
// namespace is required, so they are given together.
var leaderElectionFlags = []string{
	"--leader-election", "--leader-election-resource-lock=leases",
	"--leader-election-namespace=metacontroller", "--leader-election-id=metacontroller",
}

func TestEveryUpstreamFlagIsAcceptedAndTakesEffect(t *testing.T) {
	var all []string
	for _, f := range upstreamFlags {
		all = append(all, f.arg)
		o, _, err := parse(t, f.arg)
		if err != nil {
			t.Errorf("%s: %v", f.arg, err)
			continue
		}
		if diff := cmp.Diff(f.want, f.got(o)); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", f.arg, diff)
		}
	}
	// All at once, as one manifest would give them.
	o, _, err := parse(t, append(all, leaderElectionFlags...)...)
	if err != nil {
		t.Fatalf("all upstream flags together: %v", err)
	}
	for _, f := range upstreamFlags {
		if f.arg == "--zap-devel" {
			continue // the flags after it override its defaults
		}
		if diff := cmp.Diff(f.want, f.got(o)); diff != "" {
			t.Errorf("%s among all flags: (-want +got)\n%s", f.arg, diff)
		}
	}
	want := leader.Options{Enabled: true, ResourceLock: "leases", Namespace: "metacontroller", ID: "metacontroller"}
	got := o.leader
	got.LeaseDuration, got.RenewDeadline, got.RetryPeriod, got.NamespaceFile = 0, 0, 0, ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leader election flags: (-want +got)\n%s", diff)
	}
}

func TestUpstreamProductionManifestArgs(t *testing.T) {
	// manifests/production/metacontroller.yaml of upstream Metacontroller.
	o, _, err := parse(t, "--zap-log-level=4", "--discovery-interval=20s")
	if err != nil {
		t.Fatal(err)
	}
	want := logging.Config{Verbosity: 4, MinLevel: slog.LevelDebug, Stacktrace: logging.LevelPanic, TimeEncoding: "rfc3339"}
	if diff := cmp.Diff(want, o.logConfig); diff != "" {
		t.Errorf("logging (-want +got)\n%s", diff)
	}
	if o.engine.DiscoveryInterval != 20*time.Second {
		t.Errorf("discovery interval = %s", o.engine.DiscoveryInterval)
	}
	// The manifests of Metacontroller v1 gave klog's flags instead.
	o, _, err = parse(t, "--logtostderr", "-v=4", "--discovery-interval=20s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, o.logConfig); diff != "" {
		t.Errorf("logging of -v=4 (-want +got)\n%s", diff)
	}
}

func TestDefaultsWithoutFlags(t *testing.T) {
	o, _, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.engine.FieldManager != "metalambda" || o.pprofAddress != "0" || o.engine.EventsQPS != 1./300. || o.engine.EventsBurst != 25 {
		t.Errorf("defaults: field manager %q, pprof %q, events %g/%d", o.engine.FieldManager, o.pprofAddress, o.engine.EventsQPS, o.engine.EventsBurst)
	}
	want := logging.Config{MinLevel: slog.LevelInfo, Stacktrace: logging.LevelPanic, TimeEncoding: "rfc3339"}
	if diff := cmp.Diff(want, o.logConfig); diff != "" {
		t.Errorf("logging (-want +got)\n%s", diff)
	}
}

func TestLogLevels(t *testing.T) {
	for _, tt := range []struct {
		args      []string
		verbosity int
		minLevel  slog.Level
	}{
		{[]string{"--zap-log-level=debug"}, 1, -1},
		{[]string{"--zap-log-level=INFO"}, 0, slog.LevelInfo},
		{[]string{"--zap-log-level=error"}, 0, slog.LevelError},
		{[]string{"--zap-log-level=panic"}, 0, logging.LevelPanic},
		{[]string{"--zap-log-level=6"}, 6, -6},
		{[]string{"-v=2"}, 2, -2},
		{[]string{"-v=0"}, 0, slog.LevelInfo},
		{[]string{"--zap-log-level=3", "-v=3"}, 3, -3},
		{[]string{"--zap-log-level=debug", "-v=1"}, 1, -1},
		{[]string{"--zap-devel", "--zap-log-level=info"}, 0, slog.LevelInfo},
	} {
		o, _, err := parse(t, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if o.logConfig.Verbosity != tt.verbosity || o.logConfig.MinLevel != tt.minLevel {
			t.Errorf("%v: verbosity %d, level %v; want %d, %v", tt.args, o.logConfig.Verbosity, o.logConfig.MinLevel, tt.verbosity, tt.minLevel)
		}
	}
}

func TestInvalidUpstreamFlagValuesAreRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--zap-log-level=verbose"}, `--zap-log-level: invalid value "verbose" (want debug, info, error, panic, or an integer`},
		{[]string{"--zap-log-level=0"}, `--zap-log-level: invalid value "0"`},
		{[]string{"--zap-log-level=-3"}, `--zap-log-level: invalid value "-3"`},
		{[]string{"--zap-log-level=200"}, `--zap-log-level: invalid value "200"`},
		{[]string{"-v=x"}, `-v: invalid value "x"`},
		{[]string{"--zap-log-level=2", "-v=3"}, "--zap-log-level=2 and -v=3 disagree"},
		{[]string{"--zap-log-level=error", "-v=0"}, "--zap-log-level=error and -v=0 disagree"},
		{[]string{"--zap-encoder=yaml"}, `--zap-encoder: invalid value "yaml" (want json or console)`},
		{[]string{"--zap-stacktrace-level=warn"}, `--zap-stacktrace-level: invalid value "warn" (want info, error or panic)`},
		{[]string{"--zap-time-encoding=unix"}, `--zap-time-encoding: invalid value "unix" (want one of epoch, millis, nano, iso8601, rfc3339, rfc3339nano)`},
		{[]string{"--logtostderr=false"}, "--logtostderr=false"},
		{[]string{"--events-qps=0"}, "--events-qps must be positive, got 0"},
		{[]string{"--events-qps=-1"}, "--events-qps must be positive"},
		{[]string{"--events-qps=NaN"}, "--events-qps must be positive"},
		{[]string{"--events-burst=0"}, "--events-burst must be at least 1, got 0"},
		{[]string{"--field-manager=a", "--apply-strategy-ssa-field-manager=b"}, `--field-manager="a" and --apply-strategy-ssa-field-manager="b" disagree`},
		{[]string{"--apply-strategy-ssa-field-manager="}, "--apply-strategy-ssa-field-manager must not be empty"},
		{[]string{"--field-manager="}, "--field-manager must not be empty"},
		{[]string{"--apply-strategy=magic"}, `--apply-strategy: unknown apply strategy "magic"`},
	} {
		_, _, err := parse(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}

func TestFieldManagerAlias(t *testing.T) {
	for _, args := range [][]string{
		{"--apply-strategy-ssa-field-manager=metacontroller"},
		{"--field-manager=metacontroller"},
		{"--field-manager=metacontroller", "--apply-strategy-ssa-field-manager=metacontroller"},
	} {
		o, _, err := parse(t, args...)
		if err != nil || o.engine.FieldManager != "metacontroller" {
			t.Errorf("%v: field manager %q, %v", args, o.engine.FieldManager, err)
		}
	}
}
