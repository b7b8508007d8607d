package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metadataCases are objects whose labels and annotations take every shape a hook can
// answer with: absent, null, strings only, a non-string value, not an object, and a
// metadata that is absent, null or not an object.
func metadataCases() map[string]map[string]any {
	return map[string]map[string]any{
		"no metadata":          {"kind": "ConfigMap"},
		"null metadata":        {"metadata": nil},
		"metadata not a map":   {"metadata": "x"},
		"no labels":            {"metadata": map[string]any{"name": "a"}},
		"null labels":          {"metadata": map[string]any{"labels": nil, "annotations": nil}},
		"strings only":         {"metadata": map[string]any{"labels": map[string]any{"a": "1", "k": "old"}, "annotations": map[string]any{"b": "2", "k": "old"}}},
		"a non-string value":   {"metadata": map[string]any{"labels": map[string]any{"a": int64(1)}, "annotations": map[string]any{"b": true}}},
		"not an object":        {"metadata": map[string]any{"labels": []any{"a"}, "annotations": "b"}},
		"empty maps":           {"metadata": map[string]any{"labels": map[string]any{}, "annotations": map[string]any{}}},
		"other fields kept":    {"metadata": map[string]any{"name": "a", "ownerReferences": []any{map[string]any{"uid": "u"}}}},
		"no metadata, no kind": {},
	}
}

// TestSetMetadataStringAsGetSet: setMetadataString leaves every object as the Get,
// assignment and Set round trip of unstructured does (GetLabels then SetLabels).
func TestSetMetadataStringAsGetSet(t *testing.T) {
	for name, obj := range metadataCases() {
		for _, field := range []string{"labels", "annotations"} {
			want := &unstructured.Unstructured{Object: obj}
			want = want.DeepCopy()
			get, set := want.GetLabels, want.SetLabels
			if field == "annotations" {
				get, set = want.GetAnnotations, want.SetAnnotations
			}
			m := get()
			if m == nil {
				m = map[string]string{}
			}
			m["k"] = "v"
			set(m)

			got := (&unstructured.Unstructured{Object: obj}).DeepCopy()
			setMetadataString(got, field, "k", "v")
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("%s, %s (-Get/Set +setMetadataString):\n%s", name, field, diff)
			}
		}
	}
}

// TestSetMetadataFieldAsSetNestedField: setMetadataField leaves every object as
// unstructured.SetNestedField does.
func TestSetMetadataFieldAsSetNestedField(t *testing.T) {
	for name, obj := range metadataCases() {
		value := func() any { return []any{map[string]any{"uid": "p", "controller": true}} }
		want := (&unstructured.Unstructured{Object: obj}).DeepCopy()
		_ = unstructured.SetNestedField(want.Object, value(), "metadata", "ownerReferences")
		got := (&unstructured.Unstructured{Object: obj}).DeepCopy()
		setMetadataField(got, "ownerReferences", value())
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("%s (-SetNestedField +setMetadataField):\n%s", name, diff)
		}
	}
}
