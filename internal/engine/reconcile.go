package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/tracing"
	"github.com/metalambda/metalambda/internal/workloop"
)

// reconcile is the level-based sync of one parent. It returns how long to wait before
// the next sync the hook asked for (resyncAfterSeconds). A failure becomes a Warning
// event on the parent; a panic goes up to the work loop, which recovers it (see
// processed).
func (c *controller) reconcile(ctx context.Context, key parentKey) (after time.Duration, err error) {
	p := c.parents[key.parent]
	parent, ok := p.sub.Get(key.namespace, key.name)
	if !ok {
		return 0, nil // deleted; its children go with the garbage collector
	}
	if wait := c.env.own.hold(parent.GetUID()); wait > 0 {
		return wait, nil // the caches do not show the last sync's writes yet
	}
	if l := c.env.syncLimiter; l != nil {
		// The namespace's bucket, shared by its controllers: one tenant's
		// parents wait for their own turn, not the other tenants'.
		if err := l.Wait(ctx); err != nil {
			return 0, err
		}
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	c.env.own.begin(parent.GetUID())
	defer func() {
		if c.env.own.end(parent.GetUID()) {
			c.queue.Add(key) // its children changed and the caches show it already
		}
	}()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("parent", key.String()))
	ctx, span := c.startSync(ctx, key, parent)
	began := time.Now()
	after, err = c.sync(ctx, key, p, parent)
	endSync(span, err)
	c.env.rollouts.observe(ctx, parent.GetUID(), began, err)
	if failed(err) {
		c.env.warn(parent, "SyncError", err)
	}
	if c.onForbidden != nil && apierrors.IsForbidden(err) {
		c.onForbidden() // a namespaced controller's ServiceAccount may have lost a right
	}
	return after, err
}

// sync runs the phases: ensureFinalizer, observe children, loadRelated, call the hook
// (once per revision under rolling updates), applyChildren, writeParent, and finally
// removes the finalizer once finalized.
//
// Like upstream, a parent being deleted without a finalize hook is still synced: the
// sync hook is called and the status written, but its children are left to the
// garbage collector. When writing children fails, the parent's status is still
// written from the hook's answer, and the sync fails. A sync that created children
// writes the status of the same answer, as upstream's does; the next sync, which the
// new children cause, shows them to the hook.
//
// The events the answer carries are recorded on the parent when the sync ends,
// after its writes, whether they succeeded or not, and also when the answer was
// refused (children of undeclared types, say): a hook explains itself most when
// something goes wrong. An answer that could not be decoded records nothing.
func (c *controller) sync(ctx context.Context, key parentKey, p *parentType, parent *unstructured.Unstructured) (time.Duration, error) {
	if !p.selects(parent) && !slices.Contains(parent.GetFinalizers(), c.finalizer) {
		return 0, nil // not handled by this controller
	}
	parent, err := c.ensureFinalizer(ctx, p, parent)
	if err != nil {
		return 0, err
	}
	terminating := parent.GetDeletionTimestamp() != nil
	// While the garbage collector deletes the children first (foreground deletion),
	// the parent is synced as one without a finalize hook, as upstream does: the
	// sync hook is called and the status written, the children left alone.
	finalizing := c.hooks.finalize != nil && slices.Contains(parent.GetFinalizers(), c.finalizer) && (terminating || !p.selects(parent)) && !hasGCFinalizer(parent)
	if !p.selects(parent) && !finalizing {
		return 0, nil // released, or the garbage collector goes first
	}
	children, related, err := c.observe(ctx, key, p, parent)
	if err != nil {
		return 0, err
	}
	in := &hookInput{parentType: p, parent: parent, children: children, related: related, finalizing: finalizing, endpoint: c.hooks.sync, events: &hookEvents{}}
	defer c.recordHookEvents(ctx, parent, in.events)
	if finalizing {
		in.endpoint = c.hooks.finalize
	}
	manage := !terminating || finalizing
	var out *outcome
	if c.rollout != nil && manage {
		out, err = c.callRolling(ctx, in)
	} else {
		out, err = c.call(ctx, in)
	}
	if err != nil {
		return 0, err
	}
	var childErr error
	if manage {
		childErr = c.apply(ctx, parent, children, out.desired)
		c.states.applied(key, out.desired)
	}
	if err := c.writeParent(ctx, p, parent, out); err != nil {
		if terminating && errors.Is(err, errParentGone) {
			err = nil // the last finalizer went and the parent with it
		}
		return 0, errors.Join(childErr, err)
	}
	if childErr != nil {
		return 0, childErr
	}
	if finalizing && out.finalized {
		_, err := c.setFinalizer(ctx, p, parent, false)
		return 0, err
	}
	return out.resyncAfter, nil
}

// observe reads the parent's children (claiming, adopting and releasing them) and
// the related objects it asked for (calling the customize hook when its answer is not
// cached), in the span "observe".
func (c *controller) observe(ctx context.Context, key parentKey, p *parentType, parent *unstructured.Unstructured) (children [][]*unstructured.Unstructured, related hookapi.Objects, err error) {
	ctx, span := c.phase(ctx, "observe")
	defer func() { tracing.End(span, err) }()
	if children, err = c.flavor.observe(ctx, p, parent, c.children); err != nil {
		return nil, nil, err
	}
	related, err = c.related.objects(ctx, key, parent)
	return children, related, err
}

// apply writes the desired children, in the span "apply children".
func (c *controller) apply(ctx context.Context, parent *unstructured.Unstructured, observed [][]*unstructured.Unstructured, desired []*unstructured.Unstructured) error {
	ctx, span := c.phase(ctx, "apply children")
	err := c.applyChildren(ctx, parent, observed, desired)
	tracing.End(span, err)
	return err
}

// writeParent writes the parent's status (and what else the flavor writes of it), in
// the span "write parent".
func (c *controller) writeParent(ctx context.Context, p *parentType, parent *unstructured.Unstructured, out *outcome) error {
	ctx, span := c.phase(ctx, "write parent")
	err := c.flavor.writeParent(ctx, p, parent, out)
	tracing.End(span, err)
	return err
}

// processed records the end of a sync of key, a panicked one included: the next
// resync is a period away, and the API shows the result. A panic fails this sync and
// nothing else; like any failure it becomes a Warning event on the parent.
func (c *controller) processed(_ context.Context, key parentKey, err error) {
	var p *workloop.Panic
	if errors.As(err, &p) {
		err = fmt.Errorf("internal error in the engine (please report it): %v", p.Value)
		if parent, ok := c.parents[key.parent].sub.Get(key.namespace, key.name); ok {
			c.env.warn(parent, "SyncError", err)
		}
	}
	if c.resync != nil {
		c.resync.synced(key)
	}
	c.noteSync(key, err)
}

// noteSync records the end of a sync of key for the API: its time and error, and a
// failure in the controller's overview. What reconcile reports as no SyncError is no
// failure here either: a delay the hook asked for, a parent gone meanwhile, and a
// write conflict, which the next sync (queued at once) resolves.
func (c *controller) noteSync(key parentKey, err error) {
	if c.states == nil {
		return
	}
	if !failed(err) {
		err = nil
	}
	c.states.synced(key, time.Now(), err)
	c.env.calls.RecordSync(c.kind, c.name, err != nil)
}
