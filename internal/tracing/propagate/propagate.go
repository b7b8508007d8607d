// Package propagate carries W3C trace context (the traceparent and tracestate
// headers) over HTTP, from the engine to the gateway. It is apart from package
// tracing, whose span helpers the gateway's workers link: so that they do not
// link net/http, whose packages the Go runtime initializes at every worker's
// start.
package propagate

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// propagator carries W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Inject sets the traceparent (and tracestate) of ctx's span on h; it sets nothing
// when ctx carries no span.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the remote span context that h's traceparent names, or
// ctx itself when it names none.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
