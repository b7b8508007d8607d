package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/apply"
	"github.com/metalambda/metalambda/internal/jsonvalue"
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
		// as before); types one after the other, in the order declared. Stamping and
		// comparing take no API call, so they run here, and only the children that
		// need a write are handed to writeChildren: a converged parent, the common
		// case, starts no goroutine.
		var writes []childWrite
		for id, d := range want {
			if err := c.stampChild(parent, d); err != nil {
				errs = append(errs, err)
				continue
			}
			if !c.settled(ct, have[id], d) {
				writes = append(writes, childWrite{observed: have[id], desired: d})
			}
		}
		errs = append(errs, c.writeChildren(ctx, ct, parent, writes)...)
		for id, o := range have {
			if _, keep := want[id]; !keep && o.GetDeletionTimestamp() == nil {
				errs = append(errs, c.deleteChild(ctx, ct, o))
			}
		}
	}
	return errors.Join(errs...)
}

// childWrite is a stamped desired child that needs a write, and the child observed
// under its name (nil if none).
type childWrite struct{ observed, desired *unstructured.Unstructured }

// writeChildren converges the children of writes side by side, at most
// childWritesInFlight at once, and returns their errors. When they all fit, the
// last runs in the sync's own goroutine, whose stack has grown already, next to the
// goroutines of the others: a goroutine starts with a small stack, which encoding
// the child and sending it over HTTP/2 grew again each time.
func (c *controller) writeChildren(ctx context.Context, ct *childType, parent *unstructured.Unstructured, writes []childWrite) []error {
	errs := make([]error, len(writes))
	write := func(i int) { errs[i] = c.applyChild(ctx, ct, parent, writes[i].observed, writes[i].desired) }
	var g errgroup.Group
	g.SetLimit(childWritesInFlight)
	inline := len(writes) > 0 && len(writes) <= childWritesInFlight
	for i := range writes {
		if inline && i == len(writes)-1 {
			write(i)
			break
		}
		g.Go(func() error { write(i); return nil })
	}
	_ = g.Wait()
	return errs
}

// stampChild completes one desired child as the engine writes it: its owner (and
// label) from the parent, then what the hook asked for (stamp).
func (c *controller) stampChild(parent, desired *unstructured.Unstructured) error {
	c.flavor.prepareChild(parent, desired)
	return c.stamp(desired)
}

// settled reports whether converge would leave the observed child as it is without an
// API call: it is being deleted (and recreated once gone), or it holds desired
// already. Such a child needs no write, so applyChild has nothing to do or note.
func (c *controller) settled(ct *childType, observed, desired *unstructured.Unstructured) bool {
	if observed == nil {
		return false
	}
	return observed.GetDeletionTimestamp() != nil || c.inSync(desired, observed)
}

// applyChild converges one stamped desired child (stampChild), noting the write.
func (c *controller) applyChild(ctx context.Context, ct *childType, parent, observed, desired *unstructured.Unstructured) error {
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
		return c.createChild(ctx, ct, parent, desired)
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
		return c.updateChild(ctx, ct, parent, observed, desired)
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
	var sum [sha256.Size]byte
	// The hash of json.Marshal's encoding, which jsonvalue writes byte for byte: the
	// hashes of children written by earlier versions still match.
	if err := jsonvalue.Encoded(apply.ForApply(desired.Object), func(body []byte) { sum = sha256.Sum256(body) }); err != nil {
		return err
	}
	setMetadataString(desired, "annotations", DesiredHashAnnotation, hex.EncodeToString(sum[:12]))
	return nil
}

// createChild creates desired with a plain create, which fails rather than touch an
// object that holds the name already: the API server, not a cache of every object of
// the type, tells whether the name is free.
func (c *controller) createChild(ctx context.Context, ct *childType, parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if ct.sub.Has(desired.GetNamespace(), desired.GetName()) {
		return nil, nameTaken(desired, parent) // cached, yet not among the parent's children
	}
	body := desired
	if c.env.opts.ApplyStrategy == ServerSideApply {
		body = &unstructured.Unstructured{Object: apply.ForApply(desired.Object)} // what an apply would send
	}
	created, err := c.env.meta.create(ctx, ct.res.GroupVersionResource, body, c.env.opts.FieldManager)
	if apierrors.IsAlreadyExists(err) {
		return c.convergeNameHolder(ctx, ct, parent, desired)
	}
	return created, wrapWrite("create", desired, err)
}

// convergeNameHolder deals with a create refused because the name is taken: by a child
// of the parent that the cache does not show (yet), which is converged as observed, or
// by another object, which is refused and left alone.
func (c *controller) convergeNameHolder(ctx context.Context, ct *childType, parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	holder, err := c.env.resource(ct.res.GroupVersionResource, desired.GetNamespace()).Get(ctx, desired.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s, whose name is taken: %w", describe(desired), err)
	}
	if ref := metav1.GetControllerOfNoCopy(holder); ref == nil || ref.UID != parent.GetUID() {
		return nil, nameTaken(desired, parent)
	}
	if released, err := c.releaseUnselected(ctx, ct, parent, holder); released || err != nil {
		return nil, errors.Join(err, nameTaken(desired, parent))
	}
	return c.converge(ctx, ct, parent, holder, desired)
}

// releaseUnselected releases a child of a composite parent that no longer matches the
// parent's selector, as observe does with the children the cache shows. Under
// generateSelector the cache holds only labelled objects, so a child whose
// controller-uid label was taken away shows up only here, as a name holder.
func (c *controller) releaseUnselected(ctx context.Context, ct *childType, parent, child *unstructured.Unstructured) (bool, error) {
	comp, ok := c.flavor.(*composite)
	if !ok {
		return false, nil
	}
	sel, err := comp.selector(parent)
	if err != nil || sel.Matches(labelsOf(child)) {
		return false, err
	}
	a := &adopter{env: c.env, parent: parent}
	return true, a.setOwner(ctx, ct, child, false)
}

func nameTaken(desired, parent *unstructured.Unstructured) error {
	return fmt.Errorf("%s exists and is not controlled by %s; delete it or label it for adoption", describe(desired), describe(parent))
}

func (c *controller) updateChild(ctx context.Context, ct *childType, parent, observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.env.opts.ApplyStrategy == ServerSideApply {
		handed, err := c.handOverUpdatedFields(ctx, ct, parent, desired)
		if err != nil {
			return nil, err
		}
		applied, err := c.serverSideApply(ctx, ct, desired)
		if handed != nil && applied != nil && applied.GetResourceVersion() == handed.GetResourceVersion() {
			return nil, err // the apply changed nothing more; the hand-over is noted
		}
		return applied, err
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

// handOverUpdatedFields gives the engine's server-side apply the fields its field
// manager owns through other writes: the create of a child, the adoption of an
// orphan. Server-side apply removes a field the hook stops returning only when no
// other manager owns it, and those writes are recorded as another manager (operation
// Update rather than Apply). The cache holds no managedFields, so the child is read;
// once handed over, nothing is left to hand over and no patch is sent. It returns the
// patched child, if it patched one.
func (c *controller) handOverUpdatedFields(ctx context.Context, ct *childType, parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	client := c.env.resource(ct.res.GroupVersionResource, desired.GetNamespace())
	current, err := client.Get(ctx, desired.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s before applying it: %w", describe(desired), err)
	}
	manager := c.env.opts.FieldManager
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(current, sets.New(manager), manager)
	if err != nil || patch == nil {
		return nil, err
	}
	// The patch is guarded by the resourceVersion read: a conflict retries the sync.
	patched, err := client.Patch(ctx, desired.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: manager})
	if err != nil {
		return nil, wrapWrite("hand over the fields of", desired, err)
	}
	c.env.own.wrote(parent.GetUID(), ct.res.GroupVersionResource, patched, current.GetResourceVersion(), childUpdated)
	return patched, nil
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
