package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/tracing"
	"github.com/metalambda/metalambda/internal/workloop"
)

func traceParent() *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetKind("App")
	p.SetNamespace("ns")
	p.SetName("a")
	return p
}

// With tracing off a sync and its phases cost no allocation.
func TestSyncSpansOffAllocateNothing(t *testing.T) {
	c := &controller{kind: CompositeKind, name: "web", env: &environment{}}
	key, parent, ctx := parentKey{namespace: "ns", name: "a"}, traceParent(), context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		sctx, span := c.startSync(ctx, key, parent)
		_, phase := c.phase(sctx, "observe")
		tracing.End(phase, nil)
		endSync(span, errParentGone)
	})
	if allocs != 0 {
		t.Errorf("a sync with tracing off allocates %v times for its spans, want 0", allocs)
	}
}

// The span of a sync names the parent and says how the sync ended; only failures
// mark it failed.
func TestSyncSpanResult(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	c := &controller{kind: CompositeKind, name: "web", env: &environment{tracer: tracing.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))}}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "apps"}, "a", errors.New("changed"))
	for _, tt := range []struct {
		err    error
		result string
		failed bool
	}{
		{nil, syncOK, false},
		{errors.New("boom"), syncError, true},
		{workloop.Hold(time.Second, errors.New("429")), syncHeld, false},
		{conflict, syncConflict, true},
		{errParentGone, syncGone, false},
	} {
		exp.Reset()
		sctx, span := c.startSync(context.Background(), parentKey{namespace: "ns", name: "a"}, traceParent())
		_, phase := c.phase(sctx, "write parent")
		tracing.End(phase, nil)
		endSync(span, tt.err)
		spans := exp.GetSpans()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want the phase and the sync", len(spans))
		}
		phaseSpan, sync := spans[0], spans[1]
		if sync.Name != "sync App ns/a" || phaseSpan.Parent.SpanID() != sync.SpanContext.SpanID() {
			t.Errorf("spans %q under %v, %q; want the phase under sync App ns/a", phaseSpan.Name, phaseSpan.Parent.SpanID(), sync.Name)
		}
		attrs := attribute.NewSet(sync.Attributes...)
		if got, _ := attrs.Value("metalambda.result"); got.AsString() != tt.result {
			t.Errorf("%v: result %q, want %q", tt.err, got.AsString(), tt.result)
		}
		if got, _ := attrs.Value("metalambda.controller"); got.AsString() != "CompositeController/web" {
			t.Errorf("controller attribute %q", got.AsString())
		}
		if failed := sync.Status.Code == codes.Error; failed != tt.failed {
			t.Errorf("%v: span failed = %v, want %v", tt.err, failed, tt.failed)
		}
	}
}
