package tracing

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of Metalambda's tracers.
const Scope = "github.com/metalambda/metalambda"

// off is the span of code paths while tracing is off: it records nothing, and
// handing it out allocates nothing.
var off trace.Span = noop.Span{}

// Tracer is provider's tracer, nil when provider is nil (tracing off).
func Tracer(provider trace.TracerProvider) trace.Tracer {
	if provider == nil {
		return nil
	}
	return provider.Tracer(Scope)
}

// Start starts a span named name under ctx's span with tracer. With a nil tracer it
// returns ctx and a span that records nothing, without allocating. Callers set
// attributes after checking span.IsRecording(), so that tracing off costs nothing.
func Start(ctx context.Context, tracer trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, off
	}
	return tracer.Start(ctx, name, opts...)
}

// Child starts a span named name under ctx's span when that one records, with its
// provider; else it returns ctx and a span that records nothing. Code reached from a
// traced call (the gateway's runtimes) uses it instead of holding a tracer.
func Child(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, off
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name)
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceID is the trace ID of span as hex, "" when the span is not sampled (its trace
// is exported nowhere).
func TraceID(span trace.Span) string {
	sc := span.SpanContext()
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
