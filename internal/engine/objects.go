package engine

import (
	"errors"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Helpers about objects that the reconciler, the flavors and the manager share.

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

// setMetadataString sets metadata.<field>[key] (field is "labels" or "annotations")
// to value, leaving obj as GetLabels, an assignment and SetLabels leave it. When the
// map is absent, or holds strings only as it does unless a hook answered otherwise,
// the value goes into a new map of its own or into it in place: the round trip copied
// the map twice, once into a map[string]string and once back.
func setMetadataString(obj *unstructured.Unstructured, field, key, value string) {
	if meta, ok := obj.Object["metadata"].(map[string]any); ok {
		switch m := meta[field].(type) {
		case nil: // absent or null: Set makes a map of the one key
			meta[field] = map[string]any{key: value}
			return
		case map[string]any:
			if stringsOnly(m) {
				m[key] = value
				return
			}
		}
	}
	get, set := obj.GetLabels, obj.SetLabels
	if field == "annotations" {
		get, set = obj.GetAnnotations, obj.SetAnnotations
	}
	m := get() // nil unless a map of strings
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	set(m)
}

func stringsOnly(m map[string]any) bool {
	for _, v := range m {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// setMetadataField sets metadata.<field> to value, which the caller built for obj
// alone: as unstructured.SetNestedField does, without its deep copy of value.
func setMetadataField(obj *unstructured.Unstructured, field string, value any) {
	v, present := obj.Object["metadata"]
	if !present {
		v = map[string]any{}
		obj.Object["metadata"] = v
	}
	if meta, ok := v.(map[string]any); ok {
		meta[field] = value
	} // else SetNestedField fails (a null metadata included) and changes nothing
}
