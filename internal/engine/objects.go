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
