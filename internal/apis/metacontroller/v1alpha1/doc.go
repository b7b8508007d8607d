// Package v1alpha1 holds the Go types of Metacontroller's API group
// metacontroller.k8s.io/v1alpha1 (CompositeController, DecoratorController,
// ControllerRevision), written for this project to accept every field upstream defines.
// The engine reads these objects as unstructured data and decodes them here; there is
// no generated clientset.
package v1alpha1

// Group and Version of the API.
const (
	Group   = "metacontroller.k8s.io"
	Version = "v1alpha1"
)
