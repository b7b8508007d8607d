// Package logging is the logging setup of every metalambda binary: upstream
// Metacontroller's logging flags (controller-runtime's --zap-* flags, klog's -v and
// --logtostderr) mapped onto a log/slog handler of the standard library that klog,
// and so client-go and everything of ours, writes through. The engine takes these
// flags for compatibility with Metacontroller's manifests; the gateway and the CLI
// take the same, so that the binaries log alike.
package logging

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Options are upstream Metacontroller's logging flags (controller-runtime's
// --zap-* flags) and klog's -v and --logtostderr, as given; Config resolves them.
// Start from Defaults.
type Options struct {
	devel           bool
	level           OptionalString // --zap-log-level
	verbosity       OptionalString // -v
	encoder         OptionalString // --zap-encoder
	stacktraceLevel OptionalString // --zap-stacktrace-level
	timeEncoding    OptionalString // --zap-time-encoding
	// logToStderr is klog's --logtostderr, which old manifests of upstream pass; logs
	// always go to standard error.
	logToStderr bool
}

// Defaults are the options without flags: console records at info level.
func Defaults() Options { return Options{logToStderr: true} }

// BindFlags adds the logging flags to fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.devel, "zap-devel", o.devel, "Development mode: defaults to --zap-encoder=console, --zap-log-level=debug and stack traces on errors.")
	fs.Var(&o.encoder, "zap-encoder", "Log encoding: console (key=value text, the default) or json.")
	fs.Var(&o.level, "zap-log-level", "Log level: debug, info (the default), error, panic, or an integer > 0 for increasing verbosity (4 logs every API request, 5 the fields of each child update). Same as -v.")
	fs.Var(&o.verbosity, "v", "Log verbosity, an integer >= 0; same as --zap-log-level.")
	fs.Var(&o.stacktraceLevel, "zap-stacktrace-level", "Log stack traces with records at and above this level: info, error, or panic (never, the default).")
	fs.BoolVar(&o.logToStderr, "logtostderr", true, "Logs go to standard error; accepted for manifests of older Metacontroller versions, false is refused.")
	fs.Var(&o.timeEncoding, "zap-time-encoding", "Time format of log records: epoch, millis, nano, iso8601, rfc3339 (the default) or rfc3339nano.")
}

// Config is what the logging flags resolve to.
type Config struct {
	JSON bool
	// Verbosity is klog's -v: V(n) records are logged for n <= verbosity.
	Verbosity int
	// MinLevel drops records below it; a V(n) record has slog level -n, so -4 (debug)
	// lets V(4) through.
	MinLevel slog.Level
	// Stacktrace adds a stack trace to records at or above it.
	Stacktrace   slog.Level
	TimeEncoding string
}

// LevelPanic is above every level the binaries log at: nothing reaches it.
const LevelPanic = slog.LevelError + 4

var timeEncodings = []string{"epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"}

// Config validates the flags and resolves them, zap's way: --zap-devel changes the
// defaults of the other flags, which override it.
func (o *Options) Config() (Config, error) {
	c := Config{MinLevel: slog.LevelInfo, Stacktrace: LevelPanic, TimeEncoding: "rfc3339"}
	if !o.logToStderr {
		return c, fmt.Errorf("--logtostderr=false: logs always go to standard error")
	}
	if o.devel {
		c.Verbosity, c.MinLevel, c.Stacktrace = 1, -1, slog.LevelError
	}
	if o.encoder.Given {
		switch strings.ToLower(o.encoder.Value) {
		case "json":
			c.JSON = true
		case "console":
			c.JSON = false
		default:
			return c, fmt.Errorf("--zap-encoder: invalid value %q (want json or console)", o.encoder.Value)
		}
	}
	if err := o.resolveLevel(&c); err != nil {
		return c, err
	}
	if o.stacktraceLevel.Given {
		levels := map[string]slog.Level{"info": slog.LevelInfo, "error": slog.LevelError, "panic": LevelPanic}
		l, ok := levels[strings.ToLower(o.stacktraceLevel.Value)]
		if !ok {
			return c, fmt.Errorf("--zap-stacktrace-level: invalid value %q (want info, error or panic)", o.stacktraceLevel.Value)
		}
		c.Stacktrace = l
	}
	if o.timeEncoding.Given {
		c.TimeEncoding = strings.ToLower(o.timeEncoding.Value)
		if !slices.Contains(timeEncodings, c.TimeEncoding) {
			return c, fmt.Errorf("--zap-time-encoding: invalid value %q (want one of %s)", o.timeEncoding.Value, strings.Join(timeEncodings, ", "))
		}
	}
	return c, nil
}

// resolveLevel applies --zap-log-level and -v, which must agree when both are given.
func (o *Options) resolveLevel(c *Config) error {
	var zapV, v int
	var zapMin slog.Level
	var err error
	if o.level.Given {
		if zapV, zapMin, err = parseZapLevel(o.level.Value); err != nil {
			return err
		}
		c.Verbosity, c.MinLevel = zapV, zapMin
	}
	if !o.verbosity.Given {
		return nil
	}
	v, err = strconv.Atoi(o.verbosity.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("-v: invalid value %q (want an integer >= 0)", o.verbosity.Value)
	}
	if o.level.Given && (v != zapV || slog.Level(-v) != zapMin) {
		return fmt.Errorf("--zap-log-level=%s and -v=%s disagree; give one of them", o.level.Value, o.verbosity.Value)
	}
	c.Verbosity, c.MinLevel = v, slog.Level(-v)
	return nil
}

// parseZapLevel reads a controller-runtime log level: zap's level -n is logr's (and
// klog's) verbosity n.
func parseZapLevel(s string) (verbosity int, minLevel slog.Level, err error) {
	switch strings.ToLower(s) {
	case "debug":
		return 1, -1, nil
	case "info":
		return 0, slog.LevelInfo, nil
	case "error":
		return 0, slog.LevelError, nil
	case "panic":
		return 0, LevelPanic, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 127 {
		return 0, 0, fmt.Errorf("--zap-log-level: invalid value %q (want debug, info, error, panic, or an integer from 1 to 127)", s)
	}
	return n, slog.Level(-n), nil
}

// Install makes klog, and everything logging through it, write to w.
func (c Config) Install(w io.Writer) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", strconv.Itoa(c.Verbosity))
	klog.SetSlogLogger(slog.New(c.Handler(w)))
}

// Handler is the slog handler that writes records to w as configured.
func (c Config) Handler(w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: c.MinLevel, ReplaceAttr: c.replaceAttr}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.JSON {
		h = slog.NewJSONHandler(w, opts)
	}
	if c.Stacktrace < LevelPanic {
		h = &stacktraceHandler{Handler: h, level: c.Stacktrace}
	}
	return h
}

// replaceAttr names the standard fields like controller-runtime's zap encoders (ts,
// level, msg, error), so that log pipelines written for upstream keep working.
func (c Config) replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.Attr{Key: "ts", Value: EncodeTime(c.TimeEncoding, a.Value.Time())}
	case slog.LevelKey:
		name := levelName(a.Value.Any().(slog.Level))
		if !c.JSON {
			name = strings.ToUpper(name)
		}
		return slog.String(slog.LevelKey, name)
	case "err":
		a.Key = "error"
	}
	return a
}

// levelName spells a level like zap: debug for verbosity 1, Level(-n) beyond.
func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	case l == -1:
		return "debug"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// EncodeTime is t as the time encoding (--zap-time-encoding) writes it.
func EncodeTime(encoding string, t time.Time) slog.Value {
	switch encoding {
	case "epoch":
		return slog.Float64Value(float64(t.UnixNano()) / 1e9)
	case "millis":
		return slog.Float64Value(float64(t.UnixNano()) / 1e6)
	case "nano":
		return slog.Int64Value(t.UnixNano())
	case "iso8601":
		return slog.StringValue(t.Format("2006-01-02T15:04:05.000Z0700"))
	case "rfc3339nano":
		return slog.StringValue(t.Format(time.RFC3339Nano))
	}
	return slog.StringValue(t.Format(time.RFC3339))
}

// stacktraceHandler adds the caller's stack to records at or above level.
type stacktraceHandler struct {
	slog.Handler
	level slog.Level
}

func (h *stacktraceHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= h.level {
		r = r.Clone()
		r.AddAttrs(slog.String("stacktrace", stack()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *stacktraceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &stacktraceHandler{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h *stacktraceHandler) WithGroup(name string) slog.Handler {
	return &stacktraceHandler{Handler: h.Handler.WithGroup(name), level: h.level}
}

// stack formats the calling goroutine's stack like zap, without the frames of the
// logging libraries.
func stack() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if !isLoggingFrame(f.Function) {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			return b.String()
		}
	}
}

func isLoggingFrame(function string) bool {
	for _, prefix := range []string{"log/slog.", "github.com/go-logr/", "k8s.io/klog/"} {
		if strings.HasPrefix(function, prefix) {
			return true
		}
	}
	return strings.Contains(function, ".(*stacktraceHandler).")
}

// OptionalString is a string flag that knows whether it was given (Given), so
// that a flag's default can differ from what a value given on the command line
// means (the engine's --field-manager pair uses it too).
type OptionalString struct {
	Value string
	Given bool
}

func (s *OptionalString) String() string { return s.Value }

// Set records v as given.
func (s *OptionalString) Set(v string) error {
	s.Value, s.Given = v, true
	return nil
}
