package engine

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestSetControllerRef sets the owner references that SetOwnerReferences, which
// converts them by reflection, set before: the parent as controller first, then the
// other owners that are not controllers, whatever fields of theirs are set.
func TestSetControllerRef(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent", "metadata": map[string]any{"name": "p", "uid": "pu"}}}
	yes, no := true, false
	for name, owners := range map[string][]metav1.OwnerReference{
		"none": nil,
		"others": {
			{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "au"},
			{APIVersion: "v1", Kind: "Secret", Name: "b", UID: "bu", Controller: &no, BlockOwnerDeletion: &yes},
			{APIVersion: "v1", Kind: "Secret", Name: "", UID: "", BlockOwnerDeletion: &no},
		},
		"another controller and the parent": {
			{APIVersion: "v1", Kind: "Other", Name: "o", UID: "ou", Controller: &yes},
			{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: "pu"},
			{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "au"},
		},
	} {
		child := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}
		if owners != nil {
			child.SetOwnerReferences(owners)
		}
		want := child.DeepCopy()
		refs := []metav1.OwnerReference{controllerRef(parent)}
		for _, r := range want.GetOwnerReferences() {
			if r.UID != parent.GetUID() && (r.Controller == nil || !*r.Controller) {
				refs = append(refs, r)
			}
		}
		want.SetOwnerReferences(refs)

		setControllerRef(child, parent)
		if !reflect.DeepEqual(child.Object, want.Object) {
			t.Errorf("%s: set %v, want %v", name, child.Object, want.Object)
		}
	}
}

// TestOwnerRefObject converts as the unstructured converter does.
func TestOwnerRefObject(t *testing.T) {
	yes := true
	for _, r := range []metav1.OwnerReference{
		{},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "au"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "au", Controller: &yes, BlockOwnerDeletion: &yes},
	} {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := ownerRefObject(r); !reflect.DeepEqual(got, want) {
			t.Errorf("ownerRefObject(%+v) = %v, want %v", r, got, want)
		}
	}
}
