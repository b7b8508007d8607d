package hook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A traced call is a client span under the caller's span; the request carries its
// W3C context (traceparent) and the record its trace ID.
func TestCallCarriesTraceContext(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracer := tp.Tracer("test")
	var traceparent string
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("traceparent")
		answer(http.StatusOK, `{}`)(w, r)
	})
	log := &callLog{}
	c := &Client{Recorder: log, Tracer: tracer}
	ctx, sync := tracer.Start(context.Background(), "sync App ns/a")
	info := CallInfo{Controller: "web", ControllerType: "CompositeController", Hook: HookSync, Parent: ObjectKey{Kind: "App", Namespace: "ns", Name: "a"}}
	if err := c.Call(ctx, ep, info, map[string]any{}, &map[string]any{}); err != nil {
		t.Fatal(err)
	}
	sync.End()

	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "hook sync" {
		t.Fatalf("spans %v, want hook sync then its parent", spans)
	}
	call := spans[0]
	if call.Parent.SpanID() != sync.SpanContext().SpanID() || call.SpanKind != trace.SpanKindClient {
		t.Errorf("the call span is a %v under %v, want a client span under the sync", call.SpanKind, call.Parent.SpanID())
	}
	want := "00-" + call.SpanContext.TraceID().String() + "-" + call.SpanContext.SpanID().String() + "-01"
	if traceparent != want {
		t.Errorf("traceparent = %q, want %q", traceparent, want)
	}
	if got := log.calls[0].TraceID; got != call.SpanContext.TraceID().String() {
		t.Errorf("recorded trace ID %q, want %s", got, call.SpanContext.TraceID())
	}
	attrs := attribute.NewSet(call.Attributes...)
	for k, v := range map[string]string{"metalambda.controller": "CompositeController/web", "metalambda.parent": "ns/a", "url.full": ep.URL} {
		if got, _ := attrs.Value(attribute.Key(k)); got.AsString() != v {
			t.Errorf("attribute %s = %q, want %q", k, got.AsString(), v)
		}
	}
	if got, _ := attrs.Value("http.response.status_code"); got.AsInt64() != http.StatusOK {
		t.Errorf("http.response.status_code = %v", got)
	}
}

// Without a tracer and without a span in the context, a call sends no trace
// context and records no trace ID; with only the caller's span, it carries that one.
func TestCallWithoutTracer(t *testing.T) {
	var headers []http.Header
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		headers = append(headers, r.Header.Clone())
		answer(http.StatusOK, `{}`)(w, r)
	})
	log := &callLog{}
	c := &Client{Recorder: log}
	info := CallInfo{Hook: HookSync}
	if err := c.Call(context.Background(), ep, info, map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	if h := headers[0].Get("traceparent"); h != "" || log.calls[0].TraceID != "" {
		t.Errorf("untraced call: traceparent %q, trace ID %q", h, log.calls[0].TraceID)
	}
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "caller")
	defer span.End()
	if err := c.Call(ctx, ep, info, map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	if h := headers[1].Get("traceparent"); !strings.Contains(h, span.SpanContext().SpanID().String()) {
		t.Errorf("traceparent %q does not name the caller's span", h)
	}
}
