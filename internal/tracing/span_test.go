package tracing

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/metalambda/metalambda/internal/tracing/propagate"
)

// With tracing off, spans cost nothing: no allocation, nothing recorded, no header.
func TestTracingOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, nil, "sync")
		c, child := Child(c, "queue wait")
		propagate.Inject(c, h)
		End(child, io.EOF)
		_ = TraceID(span)
		span.End()
	})
	if allocs != 0 {
		t.Errorf("tracing off allocates %v times per span, want 0", allocs)
	}
	if len(h) != 0 {
		t.Errorf("tracing off set headers %v", h)
	}
}

// Child spans follow the provider of the span in the context; propagate.Inject
// and propagate.Extract
// carry it over HTTP headers.
func TestChildAndPropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, parent := Start(context.Background(), Tracer(tp), "hook sync")
	h := http.Header{}
	propagate.Inject(ctx, h)
	if !strings.Contains(h.Get("Traceparent"), parent.SpanContext().TraceID().String()) {
		t.Fatalf("traceparent %q does not carry trace %s", h.Get("Traceparent"), parent.SpanContext().TraceID())
	}
	remote := propagate.Extract(context.Background(), h)
	sctx, server := Start(remote, Tracer(tp), "hook ns/fn")
	_, child := Child(sctx, "worker")
	child.SetAttributes(attribute.String("k", "v"))
	End(child, io.EOF)
	server.End()
	parent.End()
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	worker, srv := spans[0], spans[1]
	if worker.Name != "worker" || worker.Parent.SpanID() != srv.SpanContext.SpanID() || worker.Status.Description != io.EOF.Error() {
		t.Errorf("worker span %+v is not a failed child of %s", worker, srv.Name)
	}
	if srv.Parent.SpanID() != parent.SpanContext().SpanID() || !srv.Parent.IsRemote() {
		t.Errorf("the server span's parent is %v, want the remote %v", srv.Parent.SpanID(), parent.SpanContext().SpanID())
	}
}
