package logging

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestEveryBinaryGetsTheEngineFlags: the flags bound on any flag set (the gateway's,
// metalambda up's) resolve as the engine's do; its own tests cover each flag.
func TestEveryBinaryGetsTheEngineFlags(t *testing.T) {
	o := Defaults()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-encoder=json", "-v=2"}); err != nil {
		t.Fatal(err)
	}
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
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
