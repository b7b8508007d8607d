package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/hookapi"
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
	c.env.own.begin(parent.GetUID())
	defer func() {
		if c.env.own.end(parent.GetUID()) {
			c.queue.Add(key) // its children changed and the caches show it already
		}
	}()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("parent", key.String()))
	after, err = c.sync(ctx, key, p, parent)
	if err != nil && !workloop.IsDelay(err) && !errors.Is(err, errParentGone) && !apierrors.IsConflict(err) {
		c.env.warn(parent, "SyncError", err)
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
// written from the hook's answer, and the sync fails. When children were created, the
// parent is written by the next sync, which sees them.
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
	children, err := c.flavor.observe(ctx, p, parent, c.children)
	if err != nil {
		return 0, err
	}
	related, err := c.related.objects(ctx, key, parent)
	if err != nil {
		return 0, err
	}
	in := &hookInput{parentType: p, parent: parent, children: children, related: related, finalizing: finalizing, endpoint: c.hooks.sync}
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
		childErr = c.applyChildren(ctx, parent, children, out.desired)
		c.states.applied(key, out.desired)
	}
	if err := c.flavor.writeParent(ctx, p, parent, out); err != nil {
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

// ensureFinalizer adds the controller's finalizer while a finalize hook exists and
// the parent is alive and selected, and removes it when the hook was taken away. It
// returns the parent to go on with.
func (c *controller) ensureFinalizer(ctx context.Context, p *parentType, parent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	has := slices.Contains(parent.GetFinalizers(), c.finalizer)
	alive := parent.GetDeletionTimestamp() == nil && p.selects(parent)
	switch {
	case c.hooks.finalize == nil && has:
		return c.setFinalizer(ctx, p, parent, false)
	case c.hooks.finalize != nil && !has && alive:
		return c.setFinalizer(ctx, p, parent, true)
	}
	return parent, nil
}

// setFinalizer adds or removes the controller's finalizer with a merge patch guarded
// by the observed resourceVersion, and returns the updated parent.
func (c *controller) setFinalizer(ctx context.Context, p *parentType, parent *unstructured.Unstructured, add bool) (*unstructured.Unstructured, error) {
	updated, err := patchFinalizers(ctx, c.env, p.res.GroupVersionResource, parent, c.finalizer, add)
	c.env.own.wrote(parent.GetUID(), p.res.GroupVersionResource, updated, parent.GetResourceVersion(), parentWritten)
	return updated, err
}

func patchFinalizers(ctx context.Context, env *environment, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, finalizer string, add bool) (*unstructured.Unstructured, error) {
	finalizers := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == finalizer })
	if add {
		finalizers = append(finalizers, finalizer)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      finalizers,
		"resourceVersion": obj.GetResourceVersion(),
	}})
	updated, err := env.resource(gvr, obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: env.opts.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("update finalizers of %s: %w", describe(obj), err)
	}
	return updated, nil
}

func hasGCFinalizer(obj *unstructured.Unstructured) bool {
	for _, f := range obj.GetFinalizers() {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			return true
		}
	}
	return false
}

// objectsFor builds a hook object map of one child type.
func (c *controller) objectsFor(version hookVersion, parentNamespaced bool, objs []*unstructured.Unstructured) hookapi.ObjectMap {
	m := make(hookapi.ObjectMap, len(objs))
	for _, o := range objs {
		m[hookapi.Key(version, parentNamespaced, o)] = o.Object
	}
	return m
}

// childObjects groups observed children by type for a hook request; every declared
// type appears, empty or not.
func (c *controller) childObjects(version hookVersion, parentNamespaced bool, children [][]*unstructured.Unstructured) hookapi.Objects {
	out := make(hookapi.Objects, len(c.children))
	for i, ct := range c.children {
		out[hookapi.TypeKey(ct.res.Kind, ct.rule.APIVersion)] = c.objectsFor(version, parentNamespaced, children[i])
	}
	return out
}

// decodeDesired turns the hook's children into objects, checking each against the
// declared child types.
func (c *controller) decodeDesired(parent *unstructured.Unstructured, raw []hookapi.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(raw))
	seen := map[string]bool{}
	for i, obj := range raw {
		if obj == nil {
			return nil, invalidResponse("children[%d] is null", i)
		}
		u := &unstructured.Unstructured{Object: obj}
		ct := c.childTypeOf(u)
		switch {
		case u.GetAPIVersion() == "" || u.GetKind() == "":
			return nil, invalidResponse("children[%d] has no apiVersion or kind", i)
		case u.GetName() == "":
			return nil, invalidResponse("children[%d] (%s) has no metadata.name", i, u.GetKind())
		case ct == nil:
			return nil, invalidResponse("children[%d] is a %s %s, which is not a declared child resource", i, u.GetAPIVersion(), u.GetKind())
		}
		if ct.res.Namespaced && u.GetNamespace() == "" {
			if parent.GetNamespace() == "" {
				return nil, invalidResponse("children[%d] (%s %s) needs metadata.namespace: the parent is cluster-scoped", i, u.GetKind(), u.GetName())
			}
			u.SetNamespace(parent.GetNamespace())
		}
		if parent.GetNamespace() != "" && ct.res.Namespaced && u.GetNamespace() != parent.GetNamespace() {
			return nil, invalidResponse("children[%d] (%s %s) is in namespace %q; children of a namespaced parent must be in its namespace %q", i, u.GetKind(), u.GetName(), u.GetNamespace(), parent.GetNamespace())
		}
		if !ct.res.Namespaced {
			u.SetNamespace("")
		}
		id := ct.res.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
		if seen[id] {
			return nil, invalidResponse("children[%d] (%s %s) is listed twice", i, u.GetKind(), u.GetName())
		}
		seen[id] = true
		out = append(out, u)
	}
	return out, nil
}

func (c *controller) childTypeOf(obj *unstructured.Unstructured) *childType {
	for _, ct := range c.children {
		if ct.rule.APIVersion == obj.GetAPIVersion() && ct.res.Kind == obj.GetKind() {
			return ct
		}
	}
	return nil
}

func equalStrings(a, b map[string]string) bool { return maps.Equal(a, b) }

func labelsOf(obj *unstructured.Unstructured) labels.Set { return labels.Set(obj.GetLabels()) }

func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}

func describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// warn records a Warning event on obj.
func (e *environment) warn(obj *unstructured.Unstructured, reason string, err error) {
	e.recorder.Event(obj, corev1.EventTypeWarning, reason, err.Error())
}

var errParentGone = errors.New("parent no longer exists")
