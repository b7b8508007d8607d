package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/metalambda/metalambda/internal/logging"
)

// The engine's logging flags are package logging's, which every binary shares.
type logOptions = logging.Options

// logConfig mirrors logging.Config field by field, so that the engine's flag tests
// compare what the flags resolve to as they did before the setup was shared.
type logConfig struct {
	json         bool
	verbosity    int
	minLevel     slog.Level
	stacktrace   slog.Level
	timeEncoding string
}

const levelPanic = logging.LevelPanic

func newLogConfig(c logging.Config) logConfig {
	return logConfig{json: c.JSON, verbosity: c.Verbosity, minLevel: c.MinLevel, stacktrace: c.Stacktrace, timeEncoding: c.TimeEncoding}
}

func (c logConfig) shared() logging.Config {
	return logging.Config{JSON: c.json, Verbosity: c.verbosity, MinLevel: c.minLevel, Stacktrace: c.stacktrace, TimeEncoding: c.timeEncoding}
}

func (c logConfig) install(w io.Writer) { c.shared().Install(w) }

func (c logConfig) handler(w io.Writer) slog.Handler { return c.shared().Handler(w) }

func encodeTime(encoding string, t time.Time) slog.Value { return logging.EncodeTime(encoding, t) }

// optionalString is a string flag that knows whether it was given.
type optionalString = logging.OptionalString
