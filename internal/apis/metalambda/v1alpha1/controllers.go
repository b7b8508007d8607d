package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mc "github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// Kinds and plural resource names of the namespaced controllers.
const (
	NamespacedCompositeKind      = "NamespacedCompositeController"
	NamespacedCompositeResource  = "namespacedcompositecontrollers"
	NamespacedDecoratorKind      = "NamespacedDecoratorController"
	NamespacedDecoratorResource  = "namespaceddecoratorcontrollers"
	DefaultControllerServiceAcct = "default"
)

// NamespacedCompositeController is a CompositeController that lives in a namespace,
// whose parents, children and related objects are all of that namespace, and which
// the engine runs with the rights of one of the namespace's ServiceAccounts.
type NamespacedCompositeController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NamespacedCompositeControllerSpec `json:"spec"`
	Status mc.ControllerStatus               `json:"status,omitempty"`
}

// NamespacedCompositeControllerSpec is upstream's CompositeController spec plus the
// ServiceAccount the engine acts as.
type NamespacedCompositeControllerSpec struct {
	mc.CompositeControllerSpec `json:",inline"`
	// ServiceAccountName is a ServiceAccount of the controller's namespace; empty
	// means "default".
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// NamespacedDecoratorController is a DecoratorController that lives in a namespace,
// like NamespacedCompositeController.
type NamespacedDecoratorController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NamespacedDecoratorControllerSpec `json:"spec"`
	Status mc.ControllerStatus               `json:"status,omitempty"`
}

// NamespacedDecoratorControllerSpec is upstream's DecoratorController spec plus the
// ServiceAccount the engine acts as.
type NamespacedDecoratorControllerSpec struct {
	mc.DecoratorControllerSpec `json:",inline"`
	// ServiceAccountName: as in NamespacedCompositeControllerSpec.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}
