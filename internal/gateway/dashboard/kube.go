package dashboard

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	mcv1 "github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engineapi"
)

// Resources the dashboard reads.
var (
	compositeControllers = schema.GroupVersionResource{Group: mcv1.Group, Version: mcv1.Version, Resource: "compositecontrollers"}
	decoratorControllers = schema.GroupVersionResource{Group: mcv1.Group, Version: mcv1.Version, Resource: "decoratorcontrollers"}
	functionsResource    = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}
	pythonLambdas        = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}
)

// controllerResource is the resource of a controller kind, false for another kind.
func controllerResource(kind string) (schema.GroupVersionResource, bool) {
	switch kind {
	case engineapi.KindComposite:
		return compositeControllers, true
	case engineapi.KindDecorator:
		return decoratorControllers, true
	}
	return schema.GroupVersionResource{}, false
}

// resourceOf is the GroupVersionResource of an engine API resource.
func resourceOf(r engineapi.Resource) schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithResource(r.Resource)
}

// list lists a resource in every namespace the way the user may, sorted by namespace
// and name.
func list(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	l, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	return items, nil
}

// Condition is a status condition as the pages show it.
type Condition struct {
	Type, Status, Reason, Message string
}

// conditions reads status.conditions.
func conditions(u *unstructured.Unstructured) []Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []Condition
	for _, c := range raw {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, Condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")})
	}
	return out
}

// condition is the condition of type t, with status Unknown when there is none.
func condition(conds []Condition, t string) Condition {
	for _, c := range conds {
		if c.Type == t {
			return c
		}
	}
	return Condition{Type: t, Status: "Unknown", Reason: "NoCondition", Message: "no " + t + " condition yet"}
}
