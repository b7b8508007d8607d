package v1alpha1

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metalambda/metalambda/internal/reservedenv"
)

// Bounds of the env sources, which the CRD's schema states too.
const (
	MaxEnvFrom      = 64
	MaxEnvValueFrom = 256
	MaxEnv          = 512
)

// ValidateEnvSources checks spec.env's names, spec.envFrom and spec.envValueFrom
// as the CRD's schema does: exactly one reference per entry, object names and keys
// Kubernetes accepts, variable names a process environment can hold and that are
// not reserved (reservedenv.Error), and no name both in env and in envValueFrom. Each error names its field (spec.envFrom[1].secretRef.name).
func ValidateEnvSources(spec *FunctionSpec) field.ErrorList {
	var errs field.ErrorList
	env := field.NewPath("spec", "env")
	if len(spec.Env) > MaxEnv {
		return field.ErrorList{field.TooMany(env, len(spec.Env), MaxEnv)}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Env)) {
		errs = append(errs, validateEnvName(env.Key(name), name)...)
	}
	from := field.NewPath("spec", "envFrom")
	if len(spec.EnvFrom) > MaxEnvFrom {
		return field.ErrorList{field.TooMany(from, len(spec.EnvFrom), MaxEnvFrom)}
	}
	for i, src := range spec.EnvFrom {
		errs = append(errs, validateEnvFrom(from.Index(i), src)...)
	}
	valueFrom := field.NewPath("spec", "envValueFrom")
	if len(spec.EnvValueFrom) > MaxEnvValueFrom {
		return append(errs, field.TooMany(valueFrom, len(spec.EnvValueFrom), MaxEnvValueFrom))
	}
	names := make([]string, 0, len(spec.EnvValueFrom))
	for name := range spec.EnvValueFrom {
		names = append(names, name)
	}
	slices.Sort(names) // errors in a stable order
	for _, name := range names {
		path := valueFrom.Key(name)
		errs = append(errs, validateEnvName(path, name)...)
		if _, dup := spec.Env[name]; dup {
			errs = append(errs, field.Invalid(path, name, "also set in spec.env; set it in one place"))
		}
		errs = append(errs, validateValueFrom(path, spec.EnvValueFrom[name])...)
	}
	return errs
}

func validateEnvFrom(path *field.Path, src EnvFromSource) field.ErrorList {
	var errs field.ErrorList
	if src.Prefix != "" {
		errs = append(errs, validateEnvName(path.Child("prefix"), src.Prefix)...)
	}
	switch {
	case src.SecretRef == nil && src.ConfigMapRef == nil:
		return append(errs, field.Required(path, "one of secretRef and configMapRef"))
	case src.SecretRef != nil && src.ConfigMapRef != nil:
		return append(errs, field.Forbidden(path.Child("configMapRef"), "may not be set with secretRef: one source per entry"))
	case src.SecretRef != nil:
		return append(errs, validateObjectName(path.Child("secretRef", "name"), src.SecretRef.Name)...)
	default:
		return append(errs, validateObjectName(path.Child("configMapRef", "name"), src.ConfigMapRef.Name)...)
	}
}

func validateValueFrom(path *field.Path, src EnvVarSource) field.ErrorList {
	switch {
	case src.SecretKeyRef == nil && src.ConfigMapKeyRef == nil:
		return field.ErrorList{field.Required(path, "one of secretKeyRef and configMapKeyRef")}
	case src.SecretKeyRef != nil && src.ConfigMapKeyRef != nil:
		return field.ErrorList{field.Forbidden(path.Child("configMapKeyRef"), "may not be set with secretKeyRef: one source per variable")}
	case src.SecretKeyRef != nil:
		return validateKeyRef(path.Child("secretKeyRef"), src.SecretKeyRef)
	default:
		return validateKeyRef(path.Child("configMapKeyRef"), src.ConfigMapKeyRef)
	}
}

func validateKeyRef(path *field.Path, ref *KeyRef) field.ErrorList {
	errs := validateObjectName(path.Child("name"), ref.Name)
	if ref.Key == "" {
		return append(errs, field.Required(path.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(ref.Key) {
		errs = append(errs, field.Invalid(path.Child("key"), ref.Key, msg))
	}
	return errs
}

func validateObjectName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// validateEnvName accepts what a Pod accepts as a variable name: printable ASCII
// other than '='.
func validateEnvName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "a variable name")}
	}
	ok := !strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r > '~' || r == '=' })
	if !ok {
		return field.ErrorList{field.Invalid(path, name, "a variable name must consist of printable ASCII characters other than '='")}
	}
	if err := reservedenv.Error(name); err != nil {
		return field.ErrorList{field.Invalid(path, name, err.Error())}
	}
	return nil
}

// Bounds of the rollout policy and the revision history, which the CRD's schema
// states too.
const (
	MaxRolloutSteps         = 20
	MaxPauseSeconds         = 86400
	MaxRevisionHistoryLimit = 50
)

// ValidateRollout checks spec.rollout and spec.revisionHistoryLimit as the CRD's
// schema does: steps between 1 and 100, increasing, the last 100; a pause of at most
// a day; no negative count. Each error names its field (spec.rollout.steps[1]).
func ValidateRollout(spec *FunctionSpec) field.ErrorList {
	var errs field.ErrorList
	if l := spec.RevisionHistoryLimit; l != nil && (*l < 0 || *l > MaxRevisionHistoryLimit) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "revisionHistoryLimit"), *l, fmt.Sprintf("must be between 0 and %d (each old revision keeps a copy of the source in the cluster)", MaxRevisionHistoryLimit)))
	}
	p := spec.Rollout
	if p == nil {
		return errs
	}
	path := field.NewPath("spec", "rollout")
	if p.PauseSeconds < 0 || p.PauseSeconds > MaxPauseSeconds {
		errs = append(errs, field.Invalid(path.Child("pauseSeconds"), p.PauseSeconds, "must be between 0 and 86400 (a day)"))
	}
	if p.MaxFailures < 0 {
		errs = append(errs, field.Invalid(path.Child("maxFailures"), p.MaxFailures, "must not be negative"))
	}
	return append(errs, validateSteps(path.Child("steps"), p.Steps)...)
}

func validateSteps(path *field.Path, steps []int32) field.ErrorList {
	if len(steps) == 0 {
		return nil // the default steps
	}
	if len(steps) > MaxRolloutSteps {
		return field.ErrorList{field.TooMany(path, len(steps), MaxRolloutSteps)}
	}
	var errs field.ErrorList
	for i, step := range steps {
		switch {
		case step < 1 || step > 100:
			errs = append(errs, field.Invalid(path.Index(i), step, "a step is a share in percent, between 1 and 100"))
		case i > 0 && step <= steps[i-1]:
			errs = append(errs, field.Invalid(path.Index(i), step, fmt.Sprintf("steps must increase: %d follows %d", step, steps[i-1])))
		}
	}
	if last := steps[len(steps)-1]; last != 100 {
		errs = append(errs, field.Invalid(path.Index(len(steps)-1), last, "the last step must be 100: a rollout ends with the new revision serving every parent"))
	}
	return errs
}
