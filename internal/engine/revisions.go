package engine

import (
	"cmp"
	"context"
	"crypto/sha1" //nolint:gosec // upstream's revision names; not used for security
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/workloop"
)

// Labels on every ControllerRevision, as upstream sets them, so that revisions of
// different parent types never overlap.
const (
	RevisionAPIGroupLabel = "metacontroller.k8s.io/apiGroup"
	RevisionResourceLabel = "metacontroller.k8s.io/resource"
)

// ControllerRevisions is the resource that records a parent's revisions.
var ControllerRevisions = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "controllerrevisions"}

// claimRevisions returns the ControllerRevisions the parent controls, adopting
// orphans that match its selector like children.
func (c *controller) claimRevisions(ctx context.Context, p *parentType, parent *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	rt := c.rollout.revisions
	out := rt.sub.Controlled(parent.GetUID())
	orphans := rt.sub.ByIndex(informer.Orphans, parent.GetNamespace())
	if len(orphans) == 0 || parent.GetDeletionTimestamp() != nil {
		return out, nil
	}
	sel, err := c.flavor.(*composite).selector(parent)
	if err != nil {
		return nil, err
	}
	reqs, _ := labels.SelectorFromSet(labels.Set{RevisionAPIGroupLabel: p.res.Group, RevisionResourceLabel: p.res.Resource}).Requirements()
	sel = sel.Add(reqs...)
	adopter := &adopter{env: c.env, p: p, parent: parent}
	for _, o := range orphans {
		if !sel.Matches(labelsOf(o)) || o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := adopter.confirmParent(ctx); err != nil {
			return nil, err
		}
		if err := adopter.setOwner(ctx, rt, o, true); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// revisionsOf materializes the parent of every revision: the latest first (the
// parent as it is), then each older one with its recorded fields patched in.
func (c *controller) revisionsOf(p *parentType, parent *unstructured.Unstructured, observed []*unstructured.Unstructured) ([]*revision, error) {
	latest := &revision{parent: parent, patch: revisionPatch(parent.Object, c.rollout.fieldPaths), claims: map[childID]bool{}}
	revs := []*revision{latest}
	for _, obj := range observed {
		var cr v1alpha1.ControllerRevision
		if err := jsonvalue.Convert(obj.Object, &cr); err != nil {
			return nil, fmt.Errorf("decode ControllerRevision %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		patch := map[string]any{}
		if err := kjson.Unmarshal(cr.ParentPatch.Raw, &patch); len(cr.ParentPatch.Raw) > 0 && err != nil {
			return nil, fmt.Errorf("ControllerRevision %s/%s: parentPatch: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		r := &revision{name: obj.GetName(), observed: obj, patch: patch, claims: map[childID]bool{}}
		for _, ch := range cr.Children {
			for _, n := range ch.Names {
				r.claims[childID{group: ch.APIGroup, kind: ch.Kind, name: n}] = true
			}
		}
		if jsonvalue.Equal(patch, latest.patch) && latest.observed == nil {
			latest.name, latest.observed, latest.claims = r.name, r.observed, r.claims
			continue
		}
		r.parent = parent.DeepCopy()
		for _, path := range c.rollout.fieldPaths {
			if v, found, _ := unstructured.NestedFieldCopy(patch, path...); found {
				_ = unstructured.SetNestedField(r.parent.Object, v, path...)
			}
		}
		revs = append(revs, r)
	}
	if latest.observed == nil {
		data, _ := json.Marshal(latest.patch)
		latest.name = revisionName(p, parent.GetUID(), data)
	}
	return revs, nil
}

// revisionPatch copies the fields that define a revision out of a parent.
func revisionPatch(parent map[string]any, fieldPaths [][]string) map[string]any {
	patch := map[string]any{}
	for _, path := range fieldPaths {
		if v, found, _ := unstructured.NestedFieldCopy(parent, path...); found {
			_ = unstructured.SetNestedField(patch, v, path...)
		}
	}
	return patch
}

// revisionName is upstream's: <resource>.<group>-<sha1(parent UID + patch)>, so that
// either engine finds the other's revisions.
func revisionName(p *parentType, uid types.UID, patch []byte) string {
	prefix := p.res.Resource + "." + cmp.Or(p.res.Group, "core")
	if len(prefix) > 253-41 {
		prefix = prefix[:253-41]
	}
	h := sha1.New() //nolint:gosec
	h.Write([]byte(uid))
	h.Write(patch)
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))
}

// writeRevisions makes the parent's ControllerRevisions what revs says: deletes the
// ones no longer live, creates the latest, updates changed claims.
func (c *controller) writeRevisions(ctx context.Context, parent *unstructured.Unstructured, observed []*unstructured.Unstructured, revs []*revision) error {
	client := c.env.resource(ControllerRevisions, parent.GetNamespace())
	live := map[string]bool{}
	for _, r := range revs {
		live[r.name] = true
	}
	log := klog.FromContext(ctx)
	for _, o := range observed {
		if live[o.GetName()] {
			continue
		}
		uid := o.GetUID()
		log.V(2).Info("Deleting ControllerRevision", "revision", o.GetName())
		err := client.Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ControllerRevision %s: %w", o.GetName(), err)
		}
	}
	for _, r := range revs {
		children := claimsList(r.claims)
		if r.observed == nil {
			obj := c.newRevision(parent, r, children)
			log.V(2).Info("Creating ControllerRevision", "revision", r.name)
			_, err := client.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.env.opts.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created by an earlier sync the cache has not shown yet.
				return workloop.After(time.Second, fmt.Errorf("ControllerRevision %s exists but is not in the cache yet", r.name))
			}
			if err != nil {
				return fmt.Errorf("create ControllerRevision %s: %w", r.name, err)
			}
			continue
		}
		current, _, _ := unstructured.NestedFieldNoCopy(r.observed.Object, "children")
		if jsonvalue.Equal(current, children) || (current == nil && len(children) == 0) {
			continue
		}
		updated := r.observed.DeepCopy()
		updated.Object["children"] = children
		log.V(2).Info("Updating ControllerRevision", "revision", r.name, "children", children)
		if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: c.env.opts.FieldManager}); err != nil {
			return fmt.Errorf("update ControllerRevision %s: %w", r.name, err)
		}
	}
	return nil
}

func (c *controller) newRevision(parent *unstructured.Unstructured, r *revision, children []any) *unstructured.Unstructured {
	p := c.parents[0]
	lbls := map[string]string{}
	if c.flavor.(*composite).generateSelector {
		lbls[ControllerUIDLabel] = string(parent.GetUID())
	} else if tl, _, err := unstructured.NestedStringMap(parent.Object, "spec", "template", "metadata", "labels"); err == nil {
		maps.Copy(lbls, tl)
	}
	lbls[RevisionAPIGroupLabel] = p.res.Group
	lbls[RevisionResourceLabel] = p.res.Resource
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":  ControllerRevisions.GroupVersion().String(),
		"kind":        "ControllerRevision",
		"parentPatch": r.patch,
	}}
	if len(children) > 0 {
		obj.Object["children"] = children
	}
	obj.SetName(r.name)
	obj.SetNamespace(parent.GetNamespace())
	obj.SetLabels(lbls)
	obj.SetOwnerReferences([]metav1.OwnerReference{controllerRef(parent)})
	return obj
}

// claimsList is a revision's claims in ControllerRevision form, sorted so that an
// unchanged revision compares equal.
func claimsList(claims map[childID]bool) []any {
	byKind := map[[2]string][]string{}
	for id := range claims {
		k := [2]string{id.group, id.kind}
		byKind[k] = append(byKind[k], id.name)
	}
	keys := slices.SortedFunc(maps.Keys(byKind), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		names := byKind[k]
		slices.Sort(names)
		out = append(out, map[string]any{"apiGroup": k[0], "kind": k[1], "names": toAny(names)})
	}
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// fieldPaths parses revisionHistory.fieldPaths (default: all of spec).
func fieldPaths(rh *v1alpha1.CompositeControllerRevisionHistory) [][]string {
	paths := []string{"spec"}
	if rh != nil && len(rh.FieldPaths) > 0 {
		paths = rh.FieldPaths
	}
	out := make([][]string, len(paths))
	for i, p := range paths {
		out[i] = strings.Split(p, ".")
	}
	return out
}
