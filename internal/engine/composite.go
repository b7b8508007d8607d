package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// ControllerUIDLabel is stamped on every child when generateSelector is set, and is
// the selector the parent's children are found by.
const ControllerUIDLabel = "controller-uid"

// composite is the CompositeController flavor: children found by label selector and
// ControllerRef, adopted and released; the hook's status goes to the parent's status
// subresource.
type composite struct {
	env              *environment
	generateSelector bool
	// statusInRevision is set when revisionHistory.fieldPaths name the status: a
	// status write then makes a new revision, which the next sync rolls to.
	statusInRevision bool
}

// selector returns the parent's child selector.
func (f *composite) selector(parent *unstructured.Unstructured) (labels.Selector, error) {
	if f.generateSelector {
		return labels.SelectorFromSet(labels.Set{ControllerUIDLabel: string(parent.GetUID())}), nil
	}
	raw, found, err := unstructured.NestedFieldNoCopy(parent.Object, "spec", "selector")
	if err != nil || !found || raw == nil {
		return nil, fmt.Errorf("%s has no spec.selector; set one, or set generateSelector on the CompositeController", describe(parent))
	}
	var sel metav1.LabelSelector
	if err := jsonvalue.Convert(raw, &sel); err != nil {
		return nil, fmt.Errorf("%s: spec.selector: %w", describe(parent), err)
	}
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return nil, fmt.Errorf("%s has an empty spec.selector, which would select every object", describe(parent))
	}
	return metav1.LabelSelectorAsSelector(&sel)
}

// observe claims the parent's children: owned children that match stay, owned
// children that stopped matching are released, matching orphans are adopted.
func (f *composite) observe(ctx context.Context, p *parentType, parent *unstructured.Unstructured, types []*childType) ([][]*unstructured.Unstructured, error) {
	sel, err := f.selector(parent)
	if err != nil {
		return nil, err
	}
	out := make([][]*unstructured.Unstructured, len(types))
	adopter := &adopter{env: f.env, p: p, parent: parent}
	for i, ct := range types {
		for _, obj := range candidates(ct, parent) {
			claimed, err := adopter.claim(ctx, ct, obj, sel)
			if err != nil {
				return nil, err
			}
			if claimed != nil {
				out[i] = append(out[i], claimed)
			}
		}
	}
	return out, nil
}

// candidates are the objects a parent controls plus the orphans it could adopt.
func candidates(ct *childType, parent *unstructured.Unstructured) []*unstructured.Unstructured {
	objs := ct.sub.Controlled(parent.GetUID())
	if parent.GetNamespace() != "" {
		return append(objs, ct.sub.ByIndex(informer.Orphans, parent.GetNamespace())...)
	}
	for _, o := range ct.sub.List("") {
		if metav1.GetControllerOfNoCopy(o) == nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// adopter applies ControllerRef semantics for one parent.
type adopter struct {
	env     *environment
	p       *parentType
	parent  *unstructured.Unstructured
	checked bool // the parent was confirmed alive with an uncached read
}

func (a *adopter) claim(ctx context.Context, ct *childType, obj *unstructured.Unstructured, sel labels.Selector) (*unstructured.Unstructured, error) {
	matches := sel.Matches(labelsOf(obj))
	ref := metav1.GetControllerOfNoCopy(obj)
	owned := ref != nil && ref.UID == a.parent.GetUID()
	switch {
	case owned && matches:
		return obj, nil
	case owned:
		return nil, a.setOwner(ctx, ct, obj, false)
	case ref != nil || !matches || obj.GetDeletionTimestamp() != nil || a.parent.GetDeletionTimestamp() != nil:
		return nil, nil
	}
	if err := a.confirmParent(ctx); err != nil {
		return nil, err
	}
	if err := a.setOwner(ctx, ct, obj, true); err != nil {
		return nil, err
	}
	return obj, nil
}

// confirmParent re-reads the parent from the API server before the first adoption,
// so that an orphan is never adopted by a parent that was just deleted.
func (a *adopter) confirmParent(ctx context.Context) error {
	if a.checked {
		return nil
	}
	fresh, err := a.env.resource(a.p.res.GroupVersionResource, a.parent.GetNamespace()).Get(ctx, a.parent.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("confirm %s before adopting: %w", describe(a.parent), err)
	}
	if fresh.GetUID() != a.parent.GetUID() || fresh.GetDeletionTimestamp() != nil {
		return errParentGone
	}
	a.checked = true
	return nil
}

// setOwner adopts (adds the parent's controller reference) or releases (removes it),
// guarded by the child's resourceVersion.
func (a *adopter) setOwner(ctx context.Context, ct *childType, obj *unstructured.Unstructured, adopt bool) error {
	var refs []metav1.OwnerReference
	for _, r := range obj.GetOwnerReferences() {
		if r.UID != a.parent.GetUID() {
			refs = append(refs, r)
		}
	}
	if adopt {
		refs = append(refs, controllerRef(a.parent))
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs,
		"resourceVersion": obj.GetResourceVersion(),
	}})
	_, err := a.env.resource(ct.res.GroupVersionResource, obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: a.env.opts.FieldManager})
	verb := map[bool]string{true: "adopt", false: "release"}[adopt]
	return wrapWrite(verb, obj, err)
}

func controllerRef(parent *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(), UID: parent.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

func (f *composite) request(controller map[string]any, in *hookInput, children hookapi.Objects) any {
	return &hookapi.CompositeRequest{Controller: controller, Parent: in.parent.Object, Children: children, Related: in.related, Finalizing: in.finalizing}
}

func (f *composite) answer() answer { return &compositeAnswer{} }

// compositeAnswer is a CompositeController hook's response.
type compositeAnswer hookapi.CompositeResponse

// ParseJSON is hookapi.CompositeResponse's: the hook client decodes the answer with it.
func (a *compositeAnswer) ParseJSON(data []byte) bool {
	return (*hookapi.CompositeResponse)(a).ParseJSON(data)
}

func (a *compositeAnswer) outcome() (*outcome, []hookapi.Object) {
	return &outcome{status: a.Status, finalized: a.Finalized, resyncAfter: seconds(a.ResyncAfterSeconds), events: a.Events}, a.Children
}

// check refuses children the parent's selector would not find again.
func (f *composite) check(parent *unstructured.Unstructured, desired []*unstructured.Unstructured) error {
	if f.generateSelector {
		return nil // the engine stamps the selector label itself
	}
	sel, err := f.selector(parent)
	if err != nil {
		return err
	}
	for _, d := range desired {
		if !sel.Matches(labelsOf(d)) {
			return invalidResponse("%s has labels %v that do not match the parent's selector %q", describe(d), d.GetLabels(), sel.String())
		}
	}
	return nil
}

func (f *composite) prepareChild(parent, child *unstructured.Unstructured) {
	if f.generateSelector {
		setMetadataString(child, "labels", ControllerUIDLabel, string(parent.GetUID()))
	}
	setControllerRef(child, parent)
}

// setControllerRef makes parent the child's controller, keeping other owners.
func setControllerRef(child, parent *unstructured.Unstructured) {
	refs := []any{ownerRefObject(controllerRef(parent))}
	for _, r := range child.GetOwnerReferences() {
		if r.UID != parent.GetUID() && (r.Controller == nil || !*r.Controller) {
			refs = append(refs, ownerRefObject(r))
		}
	}
	// As SetOwnerReferences would, which converts each reference by reflection.
	setMetadataField(child, "ownerReferences", refs)
}

// ownerRefObject is r as an unstructured value, as runtime.DefaultUnstructuredConverter
// makes it (the pointers are omitted when nil).
func ownerRefObject(r metav1.OwnerReference) map[string]any {
	m := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
	if r.Controller != nil {
		m["controller"] = *r.Controller
	}
	if r.BlockOwnerDeletion != nil {
		m["blockOwnerDeletion"] = *r.BlockOwnerDeletion
	}
	return m
}

// writeParent replaces the parent's status with the hook's, plus observedGeneration,
// through the status subresource, unless it already holds exactly that.
func (f *composite) writeParent(ctx context.Context, p *parentType, parent *unstructured.Unstructured, out *outcome) error {
	status := out.status
	if status == nil {
		status = map[string]any{}
	}
	status["observedGeneration"] = parent.GetGeneration()
	written, err := writeStatus(ctx, f.env, p.res.GroupVersionResource, parent, status)
	f.env.own.wrote(parent.GetUID(), p.res.GroupVersionResource, written, parent.GetResourceVersion(), f.statusWrite(p))
	return err
}

// statusWrite says what a status write means for the next sync. A changed status is
// shown to the hook once more, as upstream does: a hook may act only once it sees
// its status committed. Under ignoreStatusChanges it wakes nothing, unless the
// revision history reads the status, where it can make a new revision to roll to.
func (f *composite) statusWrite(p *parentType) writeKind {
	if p.ignoreStatusChanges && !f.statusInRevision {
		return parentWritten
	}
	return parentInputWritten
}

// writeStatus writes status through the status subresource unless the parent holds
// it already, and returns the written parent (nil when nothing was written).
func writeStatus(ctx context.Context, env *environment, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, status map[string]any) (*unstructured.Unstructured, error) {
	current, _, _ := unstructured.NestedFieldNoCopy(parent.Object, "status")
	if jsonvalue.Equal(current, status) {
		return nil, nil
	}
	// A shallow copy: the write only encodes it, and the cached parent's maps are
	// left as they are.
	updated := &unstructured.Unstructured{Object: maps.Clone(parent.Object)}
	updated.Object["status"] = status
	written, err := env.meta.updateStatus(ctx, gvr, updated, env.opts.FieldManager)
	if apierrors.IsNotFound(err) {
		return nil, errParentGone
	}
	if err != nil {
		return nil, fmt.Errorf("update status of %s: %w", describe(parent), err)
	}
	return written, nil
}
