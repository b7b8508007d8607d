package lambda

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/metalambda/metalambda/internal/tracing"
)

// workerSpan starts the span "worker", the call into a worker (or an in-process
// VM, evaluator or builtin), under the call's span when that one is traced.
func workerSpan(ctx context.Context, runtime string) (context.Context, trace.Span) {
	ctx, span := tracing.Child(ctx, "worker")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("metalambda.runtime", runtime))
	}
	return ctx, span
}
