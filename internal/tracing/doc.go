// Package tracing holds the small helpers that start OpenTelemetry spans only
// while tracing is on: with tracing off a code path pays nothing (no span, no
// context, no allocation). Package tracing/export sets tracing up from the
// standard OTEL_* environment variables, for every binary alike. W3C trace
// context (the traceparent header, package tracing/propagate) carries a trace
// from the engine to the gateway; no global state is set.
package tracing
