package engineapi

import (
	"encoding/json"
	"time"
)

// Controller kinds, as they appear in ControllerRef.Kind and in the API's paths.
const (
	KindComposite = "CompositeController"
	KindDecorator = "DecoratorController"
	// The namespaced controller kinds (metalambda.dev/v1alpha1): a namespace's own
	// controllers, which the engine runs as one of its ServiceAccounts.
	KindNamespacedComposite = "NamespacedCompositeController"
	KindNamespacedDecorator = "NamespacedDecoratorController"
)

// Namespaced reports whether kind is a namespaced controller kind.
func Namespaced(kind string) bool {
	return kind == KindNamespacedComposite || kind == KindNamespacedDecorator
}

// Hook names, as they appear in HookCall.Hook.
const (
	HookSync      = "sync"
	HookFinalize  = "finalize"
	HookCustomize = "customize"
)

// Ready states of a child (Child.Ready).
const (
	ReadyTrue    = "True"
	ReadyFalse   = "False"
	ReadyUnknown = "Unknown"
)

// ControllerRef names a controller: a CompositeController or DecoratorController
// (cluster-scoped, no Namespace), or a namespaced one in Namespace.
type ControllerRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is "Kind/name", or "Kind/namespace/name" for a namespaced controller: the
// form the hookcalls query takes.
func (c ControllerRef) String() string {
	if c.Namespace != "" {
		return c.Kind + "/" + c.Namespace + "/" + c.Name
	}
	return c.Kind + "/" + c.Name
}

// ObjectRef names a Kubernetes object; Namespace is empty for a cluster-scoped one.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// Resource names a resource a controller watches, as apiVersion and plural resource.
type Resource struct {
	APIVersion string `json:"apiVersion"`
	Resource   string `json:"resource"`
}

// ControllerList is the answer of GET /api/v1/controllers: the controllers the caller
// may get, sorted by kind, namespace and name (namespaced controllers only in the
// namespaces where the caller may list their kind).
type ControllerList struct {
	Items []ControllerSummary `json:"items"`
	// HistoryEnabled is false when the engine records no hook calls
	// (--hook-call-history=0); the counters below then stay zero.
	HistoryEnabled bool `json:"historyEnabled"`
}

// ControllerSummary is one controller of the overview.
type ControllerSummary struct {
	ControllerRef
	// ParentResources are the resources the controller's parents are (one for a
	// CompositeController, one or more for a DecoratorController).
	ParentResources []Resource `json:"parentResources,omitempty"`
	// ChildResources are the resources of the children it manages.
	ChildResources []Resource `json:"childResources,omitempty"`
	// Hooks maps each configured hook (sync, finalize, customize) to its URL.
	Hooks map[string]string `json:"hooks,omitempty"`
	// Running is true while the engine hosts the controller; Error says why it does not
	// (an invalid spec, a resource that does not exist, the grant a namespaced
	// controller's ServiceAccount lacks).
	Running bool   `json:"running"`
	Error   string `json:"error,omitempty"`
	// ServiceAccountName is the ServiceAccount a namespaced controller acts as.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Conditions are the status conditions the engine wrote on the controller object
	// (Ready, with reason MissingRights naming the missing grant, and others).
	Conditions []Condition `json:"conditions,omitempty"`
	// Parents is the number of parents the controller currently selects.
	Parents int `json:"parents"`
	// SyncErrorsLastHour counts failed hook calls (any hook) in the last hour.
	SyncErrorsLastHour int `json:"syncErrorsLastHour"`
	// Latency is the hook latency per minute over the last hour, oldest first; minutes
	// without calls are left out.
	Latency []LatencyPoint `json:"latency,omitempty"`
}

// Condition is one status condition of a controller object.
type Condition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// ParentList is the answer of GET .../controllers/KIND/NAME/parents: the parents of
// a controller the caller may get, sorted by namespace and name.
type ParentList struct {
	Controller ControllerRef `json:"controller"`
	Items      []ObjectRef   `json:"items"`
}

// LatencyPoint is one minute of a controller's hook calls.
type LatencyPoint struct {
	// Minute is the start of the minute (UTC).
	Minute time.Time `json:"minute"`
	Calls  int       `json:"calls"`
	Errors int       `json:"errors"`
	P50MS  float64   `json:"p50Ms"`
	P95MS  float64   `json:"p95Ms"`
}

// HookCallList is the answer of GET /api/v1/hookcalls, newest first.
type HookCallList struct {
	Items []HookCall `json:"items"`
	// LatestID is the id of the newest call the engine recorded (whether or not it is
	// shown); pass it as Since to poll for newer calls.
	LatestID uint64 `json:"latestId"`
	// HistoryEnabled is false when the engine records no hook calls.
	HistoryEnabled bool `json:"historyEnabled"`
}

// HookCall is one recorded hook call.
type HookCall struct {
	// ID grows by one with every recorded call, from 1 at engine start.
	ID         uint64        `json:"id"`
	Time       time.Time     `json:"time"`
	Controller ControllerRef `json:"controller"`
	// Hook is sync, finalize or customize.
	Hook   string    `json:"hook"`
	Parent ObjectRef `json:"parent"`
	URL    string    `json:"url"`
	// DurationMS is the time from sending the request to decoding the response.
	DurationMS float64 `json:"durationMs"`
	// Status is the HTTP status of the answer; 0 when none came (connection refused,
	// timeout).
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Request and Response are the JSON bodies, with the data and stringData values of
	// Secrets replaced by "[redacted]"; a body over the engine's bound is replaced by
	// {"truncated": true, "bytes": N}.
	Request  json.RawMessage `json:"request,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	// PreviousID is the id of the previous recorded call of the same hook for the same
	// parent, when the engine still holds it; Diff is a unified line diff of the
	// indented JSON responses, previous to this one ("" when they are equal or there is
	// no previous call).
	PreviousID uint64 `json:"previousId,omitempty"`
	Diff       string `json:"diff,omitempty"`
	// TraceID is the OpenTelemetry trace of the call (32 hex digits) when the engine
	// traces and sampled it; the gateway's invocation carries the same.
	TraceID string `json:"traceId,omitempty"`
}

// HookCallQuery filters GET /api/v1/hookcalls; zero fields do not filter.
type HookCallQuery struct {
	// Controller is "Kind/name", e.g. "CompositeController/web", or
	// "Kind/namespace/name" for a namespaced controller.
	Controller string
	// Namespace and Parent select the calls of parents with that namespace and name.
	Namespace string
	Parent    string
	// Since keeps calls with an ID greater than it.
	Since uint64
	// Limit caps the number of calls (the server applies its own maximum too).
	Limit int
}

// ParentDetail is the answer of GET /api/v1/parents/KIND/NAME/NAMESPACE/PARENT.
type ParentDetail struct {
	Controller ControllerRef `json:"controller"`
	Parent     ObjectRef     `json:"parent"`
	// LastSyncTime is the time of the last sync hook call for this parent the engine
	// remembers; LastError the error of the last failed reconcile step, empty when
	// the last sync succeeded.
	LastSyncTime *time.Time `json:"lastSyncTime,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	// Children are the children the hook last asked for and the ones the parent
	// owns, sorted by apiVersion, kind, namespace and name.
	Children []Child `json:"children"`
}

// Child is one child of a parent.
type Child struct {
	ObjectRef
	// Exists is false for a child the hook asked for that is not (yet) in the cluster.
	Exists bool `json:"exists"`
	// Desired is true when the hook's last response asked for this child.
	Desired bool `json:"desired"`
	// InSync is true when every field the hook set equals the observed object's
	// field; OutOfSync names the first differing fields otherwise (JSON paths such as
	// "spec.replicas"). A child that exists but was not asked for is not in sync.
	InSync    bool     `json:"inSync"`
	OutOfSync []string `json:"outOfSync,omitempty"`
	// Ready is True, False or Unknown (see the engine's docs for how it is read);
	// ReadyReason says where it came from.
	Ready       string `json:"ready"`
	ReadyReason string `json:"readyReason,omitempty"`
}

// MaxSyncNames bounds the parents a SyncResult names; Queued counts them all.
const MaxSyncNames = 100

// SyncRequest is the body of POST /api/v1/controllers/KIND/NAME/sync: one parent by
// Namespace (empty for a cluster-scoped parent) and Name, or All of them.
type SyncRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Kind picks among a decorator's parent kinds when several have a parent of
	// that name.
	Kind string `json:"kind,omitempty"`
	All  bool   `json:"all,omitempty"`
}

// SyncResult is the answer of a sync on demand: what was queued.
type SyncResult struct {
	Controller ControllerRef `json:"controller"`
	// Queued counts the parents queued; Parents names the first MaxSyncNames of them.
	Queued  int            `json:"queued"`
	Parents []QueuedParent `json:"parents"`
	// NotPermitted counts, for all parents, those left out because the caller may not
	// update them.
	NotPermitted int `json:"notPermitted,omitempty"`
}

// QueuedParent is one parent a sync on demand queued.
type QueuedParent struct {
	ObjectRef
	// HeldUntil is set when the parent's hook asked not to be called before then
	// (Retry-After): the queued sync runs at that time, not now.
	HeldUntil *time.Time `json:"heldUntil,omitempty"`
}
