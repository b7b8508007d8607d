package engine

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/metalambda/metalambda/internal/tracing"
	"github.com/metalambda/metalambda/internal/workloop"
)

// Results of a sync: the "metalambda.result" attribute of its span and, but for
// syncOK, the result label of metalambda_engine_syncs_total.
const (
	syncOK       = "ok"
	syncError    = "error"
	syncHeld     = "held"     // the hook asked for a delay (429 with Retry-After)
	syncConflict = "conflict" // a write conflicted; the next sync runs at once
	syncGone     = "gone"     // the parent went away meanwhile
)

// startSync starts the span of one sync of parent, "sync <Kind> <namespace>/<name>",
// when tracing is on. The phases of the sync are its children (phase), and so is
// every hook call (the hook client's span).
func (c *controller) startSync(ctx context.Context, key parentKey, parent *unstructured.Unstructured) (context.Context, trace.Span) {
	if c.env.tracer == nil {
		return tracing.Start(ctx, nil, "")
	}
	return c.env.tracer.Start(ctx, "sync "+parent.GetKind()+" "+key.String(), trace.WithAttributes(
		attribute.String("metalambda.controller", c.kind+"/"+c.name),
		attribute.String("metalambda.parent", key.String()),
		attribute.String("metalambda.parent.kind", parent.GetKind()),
		attribute.String("metalambda.parent.uid", string(parent.GetUID())),
	))
}

// endSync ends the span of a sync with its result.
func endSync(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	result := syncResult(err)
	if result == syncHeld || result == syncGone {
		err = nil
	}
	span.SetAttributes(attribute.String("metalambda.result", result))
	tracing.End(span, err)
}

// syncResult classifies what a sync returned. Only syncError is a failed sync (a
// SyncError event, a failure in the API, a failed step of a rollout): a delay the
// hook asked for, a write that conflicted with another writer's and a parent gone
// meanwhile are not, as the parent is synced again at once (or when the hook asked).
func syncResult(err error) string {
	switch {
	case err == nil:
		return syncOK
	case workloop.IsDelay(err):
		return syncHeld
	case apierrors.IsConflict(err):
		return syncConflict
	case errors.Is(err, errParentGone):
		return syncGone
	}
	return syncError
}

// failed reports whether a sync that returned err failed (see syncResult).
func failed(err error) bool { return syncResult(err) == syncError }

// phase starts the span of a phase of a sync (observe children, load related, apply
// children, write parent) under the sync's span; nothing when tracing is off.
func (c *controller) phase(ctx context.Context, name string) (context.Context, trace.Span) {
	return tracing.Start(ctx, c.env.tracer, name)
}
