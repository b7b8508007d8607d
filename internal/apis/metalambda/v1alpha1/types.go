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
	// Env holds plain environment values. A name here wins over the same name from
	// EnvFrom, as a Pod's env wins over its envFrom.
	Env map[string]string `json:"env,omitempty"`
	// EnvFrom sets a variable for every key of a Secret or a ConfigMap of the
	// Function's namespace, as a Pod's envFrom does; a later source wins over an
	// earlier one for the same name. The gateway reads them at call time.
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`
	// EnvValueFrom sets a variable, by name, to one key of a Secret or a ConfigMap
	// of the Function's namespace, as a Pod's env[].valueFrom does. A name may not
	// be both here and in Env.
	EnvValueFrom map[string]EnvVarSource `json:"envValueFrom,omitempty"`
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

// EnvFromSource is one Secret or ConfigMap whose every key becomes a variable,
// named with Prefix in front. Exactly one of SecretRef and ConfigMapRef is set.
type EnvFromSource struct {
	Prefix       string        `json:"prefix,omitempty"`
	SecretRef    *EnvSourceRef `json:"secretRef,omitempty"`
	ConfigMapRef *EnvSourceRef `json:"configMapRef,omitempty"`
}

// EnvSourceRef names a Secret or a ConfigMap of the Function's namespace.
type EnvSourceRef struct {
	Name string `json:"name"`
	// Optional lets the function run without the object: it then sets nothing.
	Optional bool `json:"optional,omitempty"`
}

// EnvVarSource is one key of a Secret or a ConfigMap. Exactly one of SecretKeyRef
// and ConfigMapKeyRef is set.
type EnvVarSource struct {
	SecretKeyRef    *KeyRef `json:"secretKeyRef,omitempty"`
	ConfigMapKeyRef *KeyRef `json:"configMapKeyRef,omitempty"`
}

// KeyRef names a key of a Secret or a ConfigMap of the Function's namespace.
type KeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Optional lets the function run without the object or the key: the variable
	// is then unset.
	Optional bool `json:"optional,omitempty"`
}

// HasEnvSources reports whether the spec reads Secrets or ConfigMaps.
func (s *FunctionSpec) HasEnvSources() bool {
	return len(s.EnvFrom) > 0 || len(s.EnvValueFrom) > 0
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
