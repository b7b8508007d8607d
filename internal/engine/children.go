package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/apply"
)

// childWritesInFlight bounds the writes one sync sends at once.
const childWritesInFlight = 8

// DesiredHashAnnotation holds a hash of what the hook last asked for, under
// server-side apply: a field the hook stops returning changes the hash, so the child
// is applied again and server-side apply removes the field.
const DesiredHashAnnotation = "metalambda.dev/desired-hash"

// applyChildren converges the parent's children to desired: create what is missing,
// update what differs (as each type's update method says), delete what the hook no
// longer returns. It is only ever called with a validated hook response.
func (c *controller) applyChildren(ctx context.Context, parent *unstructured.Unstructured, observed [][]*unstructured.Unstructured, desired []*unstructured.Unstructured) error {
	var errs []error
	for i, ct := range c.children {
		want := map[string]*unstructured.Unstructured{}
		for _, d := range desired {
			if c.childTypeOf(d) == ct {
				want[d.GetNamespace()+"/"+d.GetName()] = d
			}
		}
		have := map[string]*unstructured.Unstructured{}
		for _, o := range observed[i] {
			have[o.GetNamespace()+"/"+o.GetName()] = o
		}
		// The children of one type are written side by side (in no particular order,
		// as before); types one after the other, in the order declared.
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(childWritesInFlight)
		for id, d := range want {
			g.Go(func() error {
				err := c.applyChild(ctx, ct, parent, have[id], d)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				return nil
			})
		}
		_ = g.Wait()
		for id, o := range have {
			if _, keep := want[id]; !keep && o.GetDeletionTimestamp() == nil {
				errs = append(errs, c.deleteChild(ctx, ct, o))
			}
		}
	}
	return errors.Join(errs...)
}

// applyChild stamps one desired child and converges it, noting the write.
func (c *controller) applyChild(ctx context.Context, ct *childType, parent, observed, desired *unstructured.Unstructured) error {
	c.flavor.prepareChild(parent, desired)
	if err := c.stamp(desired); err != nil {
		return err
	}
	written, err := c.converge(ctx, ct, parent, observed, desired)
	kind := childUpdated
	if observed == nil {
		kind = childCreated
	}
	c.env.own.wrote(parent.GetUID(), ct.res.GroupVersionResource, written, versionOf(observed), kind)
	return err
}

// converge brings one child to its desired state, or leaves it when already in sync.
// It returns the child it created or updated, if any.
func (c *controller) converge(ctx context.Context, ct *childType, parent, observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if observed == nil {
		if ct.exists(desired.GetNamespace(), desired.GetName()) {
			return nil, fmt.Errorf("%s exists and is not controlled by %s; delete it or label it for adoption", describe(desired), describe(parent))
		}
		return c.createChild(ctx, ct, desired)
	}
	if observed.GetDeletionTimestamp() != nil {
		return nil, nil // recreated once it is gone
	}
	if c.inSync(desired, observed) {
		return nil, nil
	}
	switch ct.method {
	case v1alpha1.ChildUpdateOnDelete, "":
		return nil, nil
	case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
		klog.FromContext(ctx).V(5).Info("Recreating child", "child", describe(observed), "diff", apply.Diff(desired.Object, observed.Object))
		return nil, c.deleteChild(ctx, ct, observed)
	default:
		klog.FromContext(ctx).V(5).Info("Updating child", "child", describe(observed), "diff", apply.Diff(desired.Object, observed.Object))
		return c.updateChild(ctx, ct, observed, desired)
	}
}

// inSync decides, without an API call, whether observed already holds desired: every
// field the hook asks for holds, and nothing the hook set before was dropped (the
// desired hash under server-side apply, the last-applied annotation under three-way).
func (c *controller) inSync(desired, observed *unstructured.Unstructured) bool {
	if !apply.InSync(desired.Object, observed.Object) {
		return false
	}
	if c.env.opts.ApplyStrategy != ThreeWay {
		return true // the desired hash is an annotation of desired, compared above
	}
	last, err := apply.LastApplied(observed.Object)
	return err == nil && last != nil && len(apply.Removed(last, desired.Object, observed.Object)) == 0
}

// stamp records what the hook asked for on the desired object itself: the desired
// hash under server-side apply, the last-applied annotation under three-way apply.
func (c *controller) stamp(desired *unstructured.Unstructured) error {
	if c.env.opts.ApplyStrategy == ThreeWay {
		return apply.SetLastApplied(desired.Object)
	}
	body, err := json.Marshal(apply.ForApply(desired.Object))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DesiredHashAnnotation] = hex.EncodeToString(sum[:12])
	desired.SetAnnotations(annotations)
	return nil
}

func (c *controller) createChild(ctx context.Context, ct *childType, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.env.opts.ApplyStrategy == ServerSideApply {
		return c.serverSideApply(ctx, ct, desired)
	}
	created, err := c.env.resource(ct.res.GroupVersionResource, desired.GetNamespace()).Create(ctx, desired, metav1.CreateOptions{FieldManager: c.env.opts.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil, nil // the informer has not seen it yet; the next sync compares it
	}
	return created, wrapWrite("create", desired, err)
}

func (c *controller) updateChild(ctx context.Context, ct *childType, observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.env.opts.ApplyStrategy == ServerSideApply {
		return c.serverSideApply(ctx, ct, desired)
	}
	last, err := apply.LastApplied(observed.Object)
	if err != nil {
		return nil, fmt.Errorf("read last-applied configuration of %s: %w", describe(observed), err)
	}
	merged, err := apply.ThreeWayMerge(observed.Object, last, desired.Object)
	if err != nil {
		return nil, fmt.Errorf("merge %s: %w", describe(observed), err)
	}
	obj := &unstructured.Unstructured{Object: merged}
	updated, err := c.env.resource(ct.res.GroupVersionResource, obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: c.env.opts.FieldManager})
	return updated, wrapWrite("update", obj, err)
}

func (c *controller) serverSideApply(ctx context.Context, ct *childType, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(apply.ForApply(desired.Object))
	if err != nil {
		return nil, err
	}
	force := true
	applied, err := c.env.resource(ct.res.GroupVersionResource, desired.GetNamespace()).Patch(ctx, desired.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: c.env.opts.FieldManager, Force: &force})
	return applied, wrapWrite("apply", desired, err)
}

// versionOf is obj's resourceVersion, "" for no object.
func versionOf(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	return obj.GetResourceVersion()
}

// deleteChild deletes in the background, only the very object observed (UID
// precondition), so a child recreated meanwhile is not touched.
func (c *controller) deleteChild(ctx context.Context, ct *childType, observed *unstructured.Unstructured) error {
	uid := observed.GetUID()
	background := metav1.DeletePropagationBackground
	err := c.env.resource(ct.res.GroupVersionResource, observed.GetNamespace()).Delete(ctx, observed.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &background,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // already gone, or replaced
	}
	return wrapWrite("delete", observed, err)
}

func wrapWrite(verb string, obj *unstructured.Unstructured, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", verb, describe(obj), err)
}
