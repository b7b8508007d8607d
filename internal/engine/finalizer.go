package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

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

// releaseFinalizers removes the controller's finalizer from every parent, reading
// them from the API server since the controller's caches are closed.
func (c *controller) releaseFinalizers(ctx context.Context) error {
	var errs []error
	namespace := "" // every namespace; a namespaced controller's own only
	if c.env.tenant != nil {
		namespace = c.env.tenant.namespace
	}
	for _, p := range c.parents {
		list, err := c.env.resource(p.res.GroupVersionResource, namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range list.Items {
			parent := &list.Items[i]
			if slices.Contains(parent.GetFinalizers(), c.finalizer) {
				_, err := patchFinalizers(ctx, c.env, p.res.GroupVersionResource, parent, c.finalizer, false)
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
