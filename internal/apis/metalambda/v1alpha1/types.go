// Package v1alpha1 holds the Go types of metalambda.dev/v1alpha1: Function, a hook
// function the gateway serves. The gateway reads Function objects as unstructured data
// and decodes them here; there is no generated clientset.
package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Group and Version of the API, and the plural resource name of Function.
const (
	Group     = "metalambda.dev"
	Version   = "v1alpha1"
	Resource  = "functions"
	Kind      = "Function"
	MaxSource = 256 << 10
)

// Function is a hook function served by the gateway.
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FunctionSpec   `json:"spec"`
	Status FunctionStatus `json:"status,omitempty"`
}

// FunctionSpec is the code and how to run it.
type FunctionSpec struct {
	// Runtime is javascript, python, jsonnet or builtin.
	Runtime string `json:"runtime"`
	// Source is the code, or a builtin function's name.
	Source string `json:"source"`
	// Handler is the entry point; empty means the runtime's default.
	Handler string `json:"handler,omitempty"`
	// TimeoutSeconds bounds one call; zero means 10.
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// Env holds plain environment values.
	Env map[string]string `json:"env,omitempty"`
	// History says whether the gateway records this function's calls; nil records
	// them.
	History *FunctionHistory `json:"history,omitempty"`
	// Network asks for the host's network: a Python worker of the function then
	// shares the gateway's network namespace (its interfaces, loopback included)
	// instead of having only a loopback of its own. The gateway refuses such a
	// function unless it was started with --allow-function-network. JavaScript,
	// Jsonnet and builtin functions have no network API either way.
	Network bool `json:"network,omitempty"`
}

// FunctionHistory configures the record of recent calls that the gateway keeps in
// memory and serves at .../invocations.
type FunctionHistory struct {
	// Enabled records calls (their request and response with Secret data redacted,
	// and their logs); nil means true.
	Enabled *bool `json:"enabled,omitempty"`
}

// FunctionStatus is what the gateway reports.
type FunctionStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	URL                string             `json:"url,omitempty"`
	SourceHash         string             `json:"sourceHash,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}
