package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
)

// configOf binds the logging flags to a fresh flag set, parses args and resolves
// them.
func configOf(t *testing.T, args ...string) Config {
	t.Helper()
	o := Defaults()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEveryBinaryGetsTheEngineFlags: the flags bound on any flag set (the gateway's,
// metalambda up's) resolve as the engine's do; cmd/engine's tests cover each flag as
// the engine's command line gives it.
func TestEveryBinaryGetsTheEngineFlags(t *testing.T) {
	c := configOf(t, "--zap-encoder=json", "-v=2")
	want := Config{JSON: true, Verbosity: 2, MinLevel: -2, Stacktrace: LevelPanic, TimeEncoding: "rfc3339"}
	if c != want {
		t.Errorf("config %+v, want %+v", c, want)
	}
	var buf bytes.Buffer
	slog.New(c.Handler(&buf)).Info("started", "name", "gw")
	if line := buf.String(); !strings.Contains(line, `"level":"info","msg":"started","name":"gw"`) || !strings.HasPrefix(line, `{"ts":"`) {
		t.Errorf("record %q, want zap's field names", line)
	}
}

func TestDefaultsAreConsoleAtInfo(t *testing.T) {
	o := Defaults()
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{MinLevel: slog.LevelInfo, Stacktrace: LevelPanic, TimeEncoding: "rfc3339"}); c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
}

// logLines logs through the handler that args configure and returns its output.
func logLines(t *testing.T, log func(logr.Logger), args ...string) []string {
	t.Helper()
	c := configOf(t, args...)
	var buf bytes.Buffer
	log(logr.FromSlogHandler(c.Handler(&buf)))
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

func TestJSONLogsUseZapFieldNames(t *testing.T) {
	lines := logLines(t, func(l logr.Logger) {
		l.Info("Controller started", "name", "cc")
		l.V(1).Info("debug line")
		l.V(4).Info("API request", "verb", "get")
		l.V(5).Info("too verbose")
		l.Error(errors.New("boom"), "Sync failed")
	}, "--zap-encoder=json", "--zap-log-level=4", "--zap-time-encoding=nano")
	var got []map[string]any
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if ts, ok := m["ts"].(float64); !ok || time.Since(time.Unix(0, int64(ts))) > time.Minute {
			t.Errorf("ts = %v, want nanoseconds since the epoch", m["ts"])
		}
		delete(m, "ts")
		got = append(got, m)
	}
	want := []map[string]any{
		{"level": "info", "msg": "Controller started", "name": "cc"},
		{"level": "debug", "msg": "debug line"},
		{"level": "Level(-4)", "msg": "API request", "verb": "get"},
		{"level": "error", "msg": "Sync failed", "error": "boom"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got)\n%s", diff)
	}
}

func TestConsoleLogs(t *testing.T) {
	lines := logLines(t, func(l logr.Logger) {
		l.Info("hidden at error level")
		l.Error(errors.New("boom"), "Sync failed")
	}, "--zap-log-level=error", "--zap-stacktrace-level=error", "--zap-time-encoding=rfc3339nano")
	if len(lines) != 1 {
		t.Fatalf("want the error alone, got %q", lines)
	}
	line := lines[0]
	ts, rest, _ := strings.Cut(strings.TrimPrefix(line, "ts="), " ")
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("ts %q: %v", ts, err)
	}
	if !strings.HasPrefix(rest, `level=ERROR msg="Sync failed" error=boom stacktrace="`) {
		t.Errorf("line = %q", line)
	}
	// The stack starts at the caller, not in the logging libraries.
	_, trace, _ := strings.Cut(line, `stacktrace="`)
	if first, _, _ := strings.Cut(trace, `\n`); !strings.HasSuffix(first, ".TestConsoleLogs.func1") {
		t.Errorf("stack trace does not start at the caller: %q", line)
	}
}

func TestTimeEncodings(t *testing.T) {
	at := time.Date(2026, 11, 23, 9, 30, 0, 123456789, time.UTC)
	for enc, want := range map[string]any{
		"epoch":       float64(at.UnixNano()) / 1e9,
		"millis":      float64(at.UnixNano()) / 1e6,
		"nano":        at.UnixNano(),
		"iso8601":     "2026-11-23T09:30:00.123Z",
		"rfc3339":     "2026-11-23T09:30:00Z",
		"rfc3339nano": "2026-11-23T09:30:00.123456789Z",
	} {
		if got := EncodeTime(enc, at).Any(); got != want {
			t.Errorf("%s: %v, want %v", enc, got, want)
		}
	}
}

func TestInstallRoutesKlogThroughTheHandler(t *testing.T) {
	c := configOf(t, "--zap-log-level=4", "--zap-encoder=json")
	var buf bytes.Buffer
	c.Install(&buf)
	defer func() {
		klog.ClearLogger()
		Config{}.Install(io.Discard)
		klog.ClearLogger()
	}()
	klog.V(4).InfoS("legacy at 4")
	klog.V(5).InfoS("legacy at 5")
	klog.Background().V(4).Info("contextual at 4")
	klog.Background().V(5).Info("contextual at 5")
	klog.ErrorS(errors.New("boom"), "failed")
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		msgs = append(msgs, m.Msg)
	}
	if diff := cmp.Diff([]string{"legacy at 4", "contextual at 4", "failed"}, msgs); diff != "" {
		t.Errorf("messages (-want +got)\n%s", diff)
	}
}
