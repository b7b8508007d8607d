package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// DecoratorAnnotation marks attachments with the name of the DecoratorController that
// manages them.
const DecoratorAnnotation = "metacontroller.k8s.io/decorator-controller"

// decorator is the DecoratorController flavor: targets chosen by label and annotation
// selectors; attachments found by ControllerRef and annotation, never adopted; the hook
// sets labels, annotations and status of the target, never its spec.
type decorator struct {
	env  *environment
	name string // the DecoratorController's, stamped on attachments
}

// decoratorSelector builds the selects function of one resource rule.
func decoratorSelector(rule v1alpha1.DecoratorControllerResourceRule) (func(*unstructured.Unstructured) bool, error) {
	labelSel := labels.Everything()
	if rule.LabelSelector != nil {
		var err error
		if labelSel, err = metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
			return nil, fmt.Errorf("resources %s: labelSelector: %w", rule.Resource, err)
		}
	}
	annotationSel, err := annotationSelector(rule.AnnotationSelector)
	if err != nil {
		return nil, fmt.Errorf("resources %s: annotationSelector: %w", rule.Resource, err)
	}
	return func(obj *unstructured.Unstructured) bool {
		return labelSel.Matches(labels.Set(obj.GetLabels())) && annotationSel(obj.GetAnnotations())
	}, nil
}

// annotationSelector returns whether an object's annotations satisfy sel. It has
// label-selector semantics, but annotation values may hold anything, so it does not
// go through label-value validation.
func annotationSelector(sel *v1alpha1.AnnotationSelector) (func(map[string]string) bool, error) {
	if sel == nil {
		return func(map[string]string) bool { return true }, nil
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
		default:
			return nil, fmt.Errorf("unknown operator %q for key %q", e.Operator, e.Key)
		}
	}
	return func(annotations map[string]string) bool {
		for k, v := range sel.MatchAnnotations {
			if got, ok := annotations[k]; !ok || got != v {
				return false
			}
		}
		for _, e := range sel.MatchExpressions {
			if !matchExpression(e, annotations) {
				return false
			}
		}
		return true
	}, nil
}

func matchExpression(e metav1.LabelSelectorRequirement, values map[string]string) bool {
	v, has := values[e.Key]
	switch e.Operator {
	case metav1.LabelSelectorOpIn:
		return has && slices.Contains(e.Values, v)
	case metav1.LabelSelectorOpNotIn:
		return !has || !slices.Contains(e.Values, v)
	case metav1.LabelSelectorOpExists:
		return has
	default: // DoesNotExist
		return !has
	}
}

func (d *decorator) observe(_ context.Context, _ *parentType, parent *unstructured.Unstructured, types []*childType) ([][]*unstructured.Unstructured, error) {
	out := make([][]*unstructured.Unstructured, len(types))
	for i, ct := range types {
		for _, obj := range ct.sub.Controlled(parent.GetUID()) {
			if obj.GetAnnotations()[DecoratorAnnotation] == d.name {
				out[i] = append(out[i], obj)
			}
		}
	}
	return out, nil
}

func (d *decorator) request(controller map[string]any, in *hookInput, children hookapi.Objects) any {
	return &hookapi.DecoratorRequest{Controller: controller, Object: in.parent.Object, Attachments: children, Related: in.related, Finalizing: in.finalizing}
}

func (d *decorator) answer() answer { return &decoratorAnswer{} }

// decoratorAnswer is a DecoratorController hook's response.
type decoratorAnswer hookapi.DecoratorResponse

func (a *decoratorAnswer) outcome() (*outcome, []hookapi.Object) {
	return &outcome{
		status: a.Status, labels: a.Labels, annotations: a.Annotations,
		finalized: a.Finalized, resyncAfter: seconds(a.ResyncAfterSeconds), events: a.Events,
	}, a.Attachments
}

// check accepts any attachment of a declared type: they are found by controller
// reference, not by labels.
func (d *decorator) check(*unstructured.Unstructured, []*unstructured.Unstructured) error { return nil }

func (d *decorator) prepareChild(parent, child *unstructured.Unstructured) {
	annotations := child.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DecoratorAnnotation] = d.name
	child.SetAnnotations(annotations)
	setControllerRef(child, parent)
}

// writeParent writes the status (when the hook gave one) and then merges labels and
// annotations, each only when something changes. Like upstream's, each write that
// changes what the hook is shown leads to one more sync, which shows it: labels and
// annotations always, the status unless ignoreStatusChanges.
func (d *decorator) writeParent(ctx context.Context, p *parentType, parent *unstructured.Unstructured, out *outcome) error {
	version := parent.GetResourceVersion() // of the target as the next write leaves it
	if out.status != nil {
		written, err := d.writeStatus(ctx, p, parent, out.status)
		kind := parentInputWritten
		if p.ignoreStatusChanges {
			kind = parentWritten
		}
		d.env.own.wrote(parent.GetUID(), p.res.GroupVersionResource, written, version, kind)
		if err != nil {
			return err
		}
		if written != nil {
			version = written.GetResourceVersion()
		}
	}
	meta := map[string]any{}
	if changes := mapChanges(parent.GetLabels(), out.labels); len(changes) > 0 {
		meta["labels"] = changes
	}
	if changes := mapChanges(parent.GetAnnotations(), out.annotations); len(changes) > 0 {
		meta["annotations"] = changes
	}
	if len(meta) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	written, err := d.env.resource(p.res.GroupVersionResource, parent.GetNamespace()).Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: d.env.opts.FieldManager})
	d.env.own.wrote(parent.GetUID(), p.res.GroupVersionResource, written, version, parentInputWritten)
	return wrapWrite("update labels and annotations of", parent, err)
}

// writeStatus writes the target's status, through the status subresource where it
// has one, and returns the written target (nil when nothing was written).
func (d *decorator) writeStatus(ctx context.Context, p *parentType, parent *unstructured.Unstructured, status map[string]any) (*unstructured.Unstructured, error) {
	if p.res.HasStatus {
		return writeStatus(ctx, d.env, p.res.GroupVersionResource, parent, status)
	}
	current, _, _ := unstructured.NestedFieldNoCopy(parent.Object, "status")
	if jsonvalue.Equal(current, status) {
		return nil, nil
	}
	updated := parent.DeepCopy()
	updated.Object["status"] = status
	written, err := d.env.resource(p.res.GroupVersionResource, parent.GetNamespace()).Update(ctx, updated, metav1.UpdateOptions{FieldManager: d.env.opts.FieldManager})
	if err != nil {
		return nil, wrapWrite("update status of", parent, err)
	}
	return written, nil
}

// mapChanges returns the merge-patch entries that turn current into current+want,
// where a nil value in want removes the key.
func mapChanges(current map[string]string, want map[string]*string) map[string]any {
	changes := map[string]any{}
	for k, v := range want {
		old, has := current[k]
		switch {
		case v == nil && has:
			changes[k] = nil
		case v != nil && (!has || old != *v):
			changes[k] = *v
		}
	}
	return changes
}
