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
	// Rollout, when set, makes a new revision wait at a share of 0 while the
	// previous one keeps serving, for a rollout driver to move the share by these
	// steps. Without it a new revision serves every call at once.
	Rollout *RolloutPolicy `json:"rollout,omitempty"`
	// RevisionHistoryLimit is how many old revisions (ControllerRevisions that are
	// neither the current nor a live one) are kept for a rollback; nil means 10.
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// DefaultRevisionHistoryLimit is how many old revisions a Function keeps when
// spec.revisionHistoryLimit does not say.
const DefaultRevisionHistoryLimit = 10

// HistoryLimit is spec.revisionHistoryLimit, defaulted.
func (s *FunctionSpec) HistoryLimit() int {
	if s.RevisionHistoryLimit == nil {
		return DefaultRevisionHistoryLimit
	}
	return int(*s.RevisionHistoryLimit)
}

// RevisionSpec is the part of a spec that a revision records: everything that
// changes what a call runs, and nothing else (not the history settings, the
// rollout policy or the revision history limit).
func (s *FunctionSpec) RevisionSpec() FunctionSpec {
	out := *s
	out.History, out.Rollout, out.RevisionHistoryLimit = nil, nil, nil
	return out
}

// WithRevision is the spec with what a call runs taken from rev (a RevisionSpec),
// and the rest (history, rollout, revisionHistoryLimit) kept: a rollback.
func (s *FunctionSpec) WithRevision(rev FunctionSpec) FunctionSpec {
	out := rev.RevisionSpec()
	out.History, out.Rollout, out.RevisionHistoryLimit = s.History, s.Rollout, s.RevisionHistoryLimit
	return out
}

// RolloutPolicy is how a new revision takes over from the previous one.
type RolloutPolicy struct {
	// Steps are the new revision's shares, in percent, one after the other:
	// increasing, the last 100. Empty means [10, 50, 100].
	Steps []int32 `json:"steps,omitempty"`
	// PauseSeconds is the wait between two steps; zero moves on as soon as the
	// parents of a step synced.
	PauseSeconds int32 `json:"pauseSeconds,omitempty"`
	// MaxFailures is how many hook failures or sync errors of parents served by
	// the new revision halt the rollout; zero halts it at the first.
	MaxFailures int32 `json:"maxFailures,omitempty"`
	// Paused holds a rollout at its current step: the shares stay and no step
	// is taken; failures are still counted. False resumes it.
	Paused bool `json:"paused,omitempty"`
}

// Annotations on a Function that ask the rollout driver to act on the rollout
// of one revision. The value is the name of the ControllerRevision being
// rolled out (status.rollout.revision); an annotation naming another revision
// is ignored, so a stale one never acts on a later rollout.
const (
	// PromoteAnnotation moves the rollout to its last step (100) at once.
	PromoteAnnotation = Group + "/rollout-promote"
	// AbortAnnotation halts the rollout as too many failures would: the
	// previous revision serves every parent again.
	AbortAnnotation = Group + "/rollout-abort"
)

// DefaultRolloutSteps are the steps of a policy that names none.
var DefaultRolloutSteps = []int32{10, 50, 100}

// StepsOrDefault are the policy's steps, defaulted.
func (p *RolloutPolicy) StepsOrDefault() []int32 {
	if len(p.Steps) == 0 {
		return DefaultRolloutSteps
	}
	return p.Steps
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
	// CurrentRevision names the ControllerRevision of the spec: the latest revision.
	CurrentRevision string `json:"currentRevision,omitempty"`
	// Revisions are the live revisions, the ones calls are served by, oldest
	// first; their shares add up to 100. One at 100 normally; two during a
	// rollout.
	Revisions []RevisionShare `json:"revisions,omitempty"`
	// Rollout is the state of the rollout of CurrentRevision, written by the
	// rollout driver.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// RevisionShare is one live revision and its share of the parents.
type RevisionShare struct {
	// Name is the revision's ControllerRevision.
	Name string `json:"name"`
	// Revision is its number, increasing per Function.
	Revision int64 `json:"revision"`
	// Share is the percentage of parents it serves (see internal/rollout).
	Share int32 `json:"share"`
}

// Phases of a rollout.
const (
	RolloutProgressing = "Progressing"
	RolloutPaused      = "Paused"
	RolloutHalted      = "Halted"
	RolloutComplete    = "Complete"
)

// RolloutStatus is where the rollout of a new revision stands.
type RolloutStatus struct {
	// Revision is the ControllerRevision being rolled out; From the one it replaces.
	Revision string `json:"revision,omitempty"`
	From     string `json:"from,omitempty"`
	// Step is the index, in spec.rollout.steps, of the step reached.
	Step int32 `json:"step,omitempty"`
	// Phase is Progressing, Paused, Halted or Complete.
	Phase    string `json:"phase,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Failures int32  `json:"failures,omitempty"`
	// FailingParents names up to MaxFailingParents parents whose sync failed on
	// the new revision, each as "<controller kind>/<controller name> <namespace>/<name>".
	FailingParents []string `json:"failingParents,omitempty"`
	// StepStartTime is when the current step began.
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
}

// MaxFailingParents bounds RolloutStatus.FailingParents.
const MaxFailingParents = 10

// RevisionLabel labels each ControllerRevision (apps/v1) of a Function with the
// Function's name.
const RevisionLabel = Group + "/function"

// RevisionData is the data of a Function's ControllerRevision: the revision's part
// of the spec (FunctionSpec.RevisionSpec).
type RevisionData struct {
	Spec FunctionSpec `json:"spec"`
}
