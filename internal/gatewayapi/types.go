package gatewayapi

import (
	"encoding/json"
	"strings"
	"time"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

// FunctionSpec is the flat form of a Function that PUT and POST take, besides the
// Function object itself.
type FunctionSpec struct {
	Runtime        string                       `json:"runtime"`
	Source         string                       `json:"source"`
	Handler        string                       `json:"handler,omitempty"`
	TimeoutSeconds int                          `json:"timeoutSeconds,omitempty"`
	Env            map[string]string            `json:"env,omitempty"`
	EnvFrom        []fnv1.EnvFromSource         `json:"envFrom,omitempty"`
	EnvValueFrom   map[string]fnv1.EnvVarSource `json:"envValueFrom,omitempty"`
}

// Invocation is one recorded call of a function.
type Invocation struct {
	Time       time.Time `json:"time"`
	DurationMS float64   `json:"durationMs"`
	Source     string    `json:"source"` // "hook" or "invoke"
	// Revision is the Function's ControllerRevision that answered.
	Revision string            `json:"revision,omitempty"`
	Status   int               `json:"status"`
	Error    string            `json:"error,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Request  json.RawMessage   `json:"request,omitempty"`
	Response json.RawMessage   `json:"response,omitempty"`
	Logs     string            `json:"logs,omitempty"`
	// Replica is the gateway replica that served the call (its pod's name).
	Replica string `json:"replica,omitempty"`
	// TraceID is the OpenTelemetry trace of the call (32 hex digits) when the
	// gateway traces and sampled it: a hook call's is the engine's trace.
	TraceID string `json:"traceId,omitempty"`
}

// Parent names the parent object of the call's hook request.
func (i Invocation) Parent() string { return parentOf(i.Request) }

// InvocationList is the answer of GET .../invocations: the recorded calls, newest
// first, and whether the function records calls at all (spec.history.enabled).
type InvocationList struct {
	Items   []Invocation `json:"items"`
	Enabled bool         `json:"enabled"`
	// Unreachable names the gateway replicas that did not answer, whose calls
	// are missing from Items.
	Unreachable []string `json:"unreachable,omitempty"`
}

// InvokeResult is the answer of POST .../invoke.
type InvokeResult struct {
	Response   json.RawMessage `json:"response"`
	Logs       string          `json:"logs"`
	DurationMS float64         `json:"durationMs"`
}

// ReplayRequest is the body of POST .../replay: the candidate and how many of the
// most recent recorded calls to run it against.
type ReplayRequest struct {
	Runtime        string            `json:"runtime"`
	Source         string            `json:"source"`
	Handler        string            `json:"handler"`
	TimeoutSeconds int32             `json:"timeoutSeconds"`
	Env            map[string]string `json:"env"`
	Limit          int               `json:"limit"`
}

// ReplayResult is the answer of a replay, newest call first.
type ReplayResult struct {
	Items []ReplayedCall `json:"items"`
	// Changed counts the items whose answer changes.
	Changed int `json:"changed"`
	// Enabled is false when the function records no calls (spec.history.enabled).
	Enabled bool `json:"enabled"`
}

// ReplayedCall is one recorded call and what the candidate answers to its request.
type ReplayedCall struct {
	Time   time.Time `json:"time"`
	Source string    `json:"source"`
	// Request is the recorded request, as the history keeps it.
	Request json.RawMessage `json:"request,omitempty"`
	Old     CallOutcome     `json:"old"`
	// New is nil when the call was not run; Error says why.
	New     *CallOutcome `json:"new,omitempty"`
	Changed bool         `json:"changed"`
	// Diff is a unified diff of the old and the new answer, when they differ.
	Diff  string `json:"diff,omitempty"`
	Error string `json:"error,omitempty"`
	// Notes say what limits the comparison: a request with redacted values, an
	// answer kept only by its size.
	Notes []string `json:"notes,omitempty"`
}

// Parent names the parent object of the call's hook request.
func (c ReplayedCall) Parent() string { return parentOf(c.Request) }

// CallOutcome is the answer of one call: a status (200, or 500 for a failure), the
// response or the error, and the logs.
type CallOutcome struct {
	Status     int             `json:"status"`
	Response   json.RawMessage `json:"response,omitempty"`
	Error      string          `json:"error,omitempty"`
	Logs       string          `json:"logs,omitempty"`
	DurationMS float64         `json:"durationMs"`
}

// parentOf is "Kind namespace/name" of a hook request's parent, or "" when the
// request has none.
func parentOf(request json.RawMessage) string {
	var req struct {
		Parent *struct {
			Kind     string                           `json:"kind"`
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		} `json:"parent"`
	}
	if json.Unmarshal(request, &req) != nil || req.Parent == nil {
		return ""
	}
	name := req.Parent.Metadata.Name
	if ns := req.Parent.Metadata.Namespace; ns != "" {
		name = ns + "/" + name
	}
	return strings.TrimSpace(req.Parent.Kind + " " + name)
}

// Revision is one revision of a function (its apps/v1 ControllerRevision), as GET
// .../revisions answers it.
type Revision struct {
	// Name is the ControllerRevision's.
	Name string `json:"name"`
	// Revision is its number, increasing per function.
	Revision int64     `json:"revision"`
	Created  time.Time `json:"created"`
	// Current is the spec's revision (status.currentRevision).
	Current bool `json:"current,omitempty"`
	// Share is the percentage of parents it serves, for a live revision
	// (status.revisions); nil for one that serves none.
	Share *int32 `json:"share,omitempty"`
	// Spec is what it runs: the revision's part of the Function's spec.
	Spec fnv1.FunctionSpec `json:"spec"`
}

// RevisionList is the answer of GET .../revisions: the function's revisions, newest
// first.
type RevisionList struct {
	Items []Revision `json:"items"`
}
