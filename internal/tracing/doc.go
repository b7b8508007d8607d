// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, for every binary alike, and holds the small helpers that
// start spans only while tracing is on: with tracing off a code path pays nothing
// (no span, no context, no allocation).
//
// Tracing is off unless OTEL_TRACES_EXPORTER names an exporter (otlp, console) or
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). W3C trace context (the traceparent header)
// carries a trace from the engine to the gateway; no global state is set.
package tracing
