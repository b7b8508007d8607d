package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/metalambda/metalambda/internal/tracing/propagate"
)

// Sources of a call, as an Invocation records them.
const (
	sourceHook   = "hook"
	sourceInvoke = "invoke"
)

// traced serves a call of a function in a server span, "hook <namespace>/<name>" or
// "invoke <namespace>/<name>", that continues the W3C trace context of the request
// (an engine's hook call). The runtimes add its children: "queue wait" for a worker
// of the function, "worker start" when one must be started, "worker" for the call
// into it. Without a tracer the handler runs as it is.
func (g *Gateway) traced(source string, next http.HandlerFunc) http.HandlerFunc {
	if g.tracer == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		fn := chi.URLParam(r, "namespace") + "/" + chi.URLParam(r, "name")
		ctx := propagate.Extract(r.Context(), r.Header)
		ctx, span := g.tracer.Start(ctx, source+" "+fn, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("metalambda.function", fn),
			attribute.String("metalambda.source", source),
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
		))
		defer span.End()
		if g.opts.Replica != "" {
			span.SetAttributes(attribute.String("metalambda.replica", g.opts.Replica))
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next(ww, r.WithContext(ctx))
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// noteRevision names, on the call's span, the revision of the function that answers.
func noteRevision(r *http.Request, revision string) {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() && revision != "" {
		span.SetAttributes(attribute.String("metalambda.revision", revision))
	}
}
