// Package api is the engine's API (its wire types are in package engineapi):
// controller summaries, hook call history and parent details, each shown only to a
// caller that may get it, and syncs on demand of parents the caller may update. It reads the engine through the narrow views of Engine and
// Controller, and keeps the hook call History the engine records into.
package api

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// Engine is what the API reads of the engine it serves. The engine implements it
// with views of its controllers, so that this package never reaches into them: what
// a reader may see is decided here, what there is to see there.
type Engine interface {
	// Ready reports whether the engine has synced its caches and serves controllers.
	Ready() bool
	// Standby reports whether the engine is a standby replica under leader election,
	// which runs no controllers, and the leader's identity ("" while none is known).
	Standby() (leader string, standby bool)
	// Controllers are the controller objects the engine serves, the namespaced ones
	// included, sorted by kind, namespace and name.
	Controllers() []*unstructured.Unstructured
	// Controller is the running controller of kind, namespace ("" for a
	// cluster-scoped kind) and name, or nil.
	Controller(kind, namespace, name string) Controller
	// Resource resolves a parent's apiVersion and kind to its resource, which
	// authorization names.
	Resource(apiVersion, kind string) (Resource, error)
}

// Controller is what a running controller shows readers.
type Controller interface {
	// Overview is what the controller knows of itself.
	Overview() Overview
	// ParentResources are the resources of its parents, which a caller is authorized
	// on before any parent is looked up.
	ParentResources() []Resource
	// Parents are the parents the controller handles named name in namespace ("" for
	// cluster-scoped ones); kind, when not empty, picks among a decorator's resources.
	// More than one is ambiguous.
	Parents(namespace, name, kind string) []Parent
	// ParentState is what the controller remembers of one of its parents, with the
	// children as the caches hold them.
	ParentState(p Parent) ParentState
	// ChildResource is the resource of the declared child type of group and kind.
	ChildResource(group, kind string) (Resource, bool)
	// AllParents are every parent the controller handles, sorted by namespace and
	// name.
	AllParents() []Parent
	// Enqueue queues p for a sync now (the work queue's Add: ahead of resyncs, and
	// past any error backoff). It returns how long a Retry-After of p's hook still
	// holds it (0: none); the queued sync waits for that.
	Enqueue(p Parent) time.Duration
}

// Resource is a resource as authorization names it.
type Resource struct{ Group, Resource string }

// Overview is a running controller's part of its engineapi.ControllerSummary.
type Overview struct {
	ParentResources, ChildResources []engineapi.Resource
	// Parents counts the objects of the parent resources the controller selects.
	Parents int
	// Hooks are the URLs of the hooks set, by engineapi.HookSync, HookFinalize and
	// HookCustomize.
	Hooks map[string]string
}

// Parent is one parent a controller handles.
type Parent struct {
	Object   *unstructured.Unstructured
	Resource Resource
	// Type is which of the controller's parent resources it is of (a decorator has
	// several), for ParentState.
	Type int
}

// ParentState is a parent's last sync and its children.
type ParentState struct {
	LastSync  time.Time // zero before the first remembered sync
	LastError error
	// Desired are the children of the hook's last answer, as the engine applied them,
	// each with the cluster's object.
	Desired []DesiredChild
	// Controlled are the objects of the controller's child types the parent controls.
	Controlled []*unstructured.Unstructured
}

// DesiredChild is a child the hook asked for.
type DesiredChild struct {
	Desired *unstructured.Unstructured
	// Observed is the cluster's object of that name, nil when it does not exist (or
	// is of no declared child type).
	Observed *unstructured.Unstructured
	// InSync is whether Observed holds Desired as the engine decides it before it
	// writes; it means nothing when Observed has another controller.
	InSync bool
}
