package hookapi

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// Object is one Kubernetes object as the hook sees it.
type Object = map[string]any

// ObjectMap holds objects of one type, keyed as the hook version says (see Key).
type ObjectMap map[string]Object

// Objects groups object maps by type, keyed "<Kind>.<apiVersion>" such as
// "ConfigMap.v1" or "Ingress.networking.k8s.io/v1". Every declared type has an entry,
// empty when there are no objects of it.
type Objects map[string]ObjectMap

// TypeKey is the key of Objects for a kind and apiVersion.
func TypeKey(kind, apiVersion string) string { return kind + "." + apiVersion }

// CompositeRequest is sent to a CompositeController's sync and finalize hooks.
type CompositeRequest struct {
	Controller Object  `json:"controller"`
	Parent     Object  `json:"parent"`
	Children   Objects `json:"children"`
	Related    Objects `json:"related"`
	Finalizing bool    `json:"finalizing"`
}

// CompositeResponse is what a CompositeController's sync and finalize hooks answer.
type CompositeResponse struct {
	// Status replaces the parent's whole .status; nil leaves it alone.
	Status map[string]any `json:"status"`
	// Children is the full desired set: a child of a declared type that is not listed
	// is deleted.
	Children           []Object `json:"children"`
	ResyncAfterSeconds float64  `json:"resyncAfterSeconds"`
	Finalized          bool     `json:"finalized"`
	// Events are recorded on the parent (see Event); an extension of Metacontroller's
	// format, left out when empty.
	Events []Event `json:"events,omitempty"`
}

// DecoratorRequest is sent to a DecoratorController's sync and finalize hooks.
type DecoratorRequest struct {
	Controller  Object  `json:"controller"`
	Object      Object  `json:"object"`
	Attachments Objects `json:"attachments"`
	Related     Objects `json:"related"`
	Finalizing  bool    `json:"finalizing"`
}

// DecoratorResponse is what a DecoratorController's sync and finalize hooks answer.
type DecoratorResponse struct {
	// Labels and Annotations are merged into the object; a nil value removes the key.
	Labels      map[string]*string `json:"labels"`
	Annotations map[string]*string `json:"annotations"`
	// Status replaces the object's .status; nil leaves it alone.
	Status             map[string]any `json:"status"`
	Attachments        []Object       `json:"attachments"`
	ResyncAfterSeconds float64        `json:"resyncAfterSeconds"`
	Finalized          bool           `json:"finalized"`
	// Events are recorded on the object (see Event), as for a CompositeController.
	Events []Event `json:"events,omitempty"`
}

// CustomizeRequest is sent to a customize hook.
type CustomizeRequest struct {
	Controller Object `json:"controller"`
	Parent     Object `json:"parent"`
}

// CustomizeResponse lists the related objects a parent wants to see.
type CustomizeResponse struct {
	RelatedResources []v1alpha1.RelatedResourceRule `json:"relatedResources"`
}

// Key returns the key of obj in an ObjectMap. Version v2 keys every namespaced object
// "namespace/name". Version v1 keys by name alone, except for namespaced objects of a
// cluster-scoped parent ("namespace/name").
func Key(version v1alpha1.HookVersion, parentNamespaced bool, obj *unstructured.Unstructured) string {
	ns := obj.GetNamespace()
	if ns == "" {
		return obj.GetName()
	}
	if version == v1alpha1.HookVersionV2 || !parentNamespaced {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
