package pythonlambda

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// DefaultImage is the image of spec.image when it is empty.
const DefaultImage = "python:3.11-slim"

// ErrInvalidParent is wrapped by Sync's error when the parent is not a valid
// PythonLambda (the API server's schema should have refused it).
var ErrInvalidParent = errors.New("invalid PythonLambda")

// maxCodeBytes keeps the ConfigMap, which also holds script.py, under the API
// server's 1 MiB limit.
const maxCodeBytes = 1<<20 - 64<<10

// reservedEnv are set by the hook on every pod; spec.env may not name them.
var reservedEnv = map[string]bool{"POD_IP": true, "PORT": true}

// spec is the PythonLambda's spec.
type spec struct {
	Code             string                      `json:"code"`
	Replicas         *int32                      `json:"replicas"`
	Host             string                      `json:"host"`
	Image            string                      `json:"image"`
	Env              []corev1.EnvVar             `json:"env"`
	EnvFrom          []corev1.EnvFromSource      `json:"envFrom"`
	Requirements     string                      `json:"requirements"`
	Resources        corev1.ResourceRequirements `json:"resources"`
	IngressClassName string                      `json:"ingressClassName"`
	// ScaleToZero, when set, lets the lambda drop to zero pods when idle (scale.go).
	ScaleToZero *scaleToZero `json:"scaleToZero"`
}

// lambda is the parent as the hook reads it: spec defaulted and validated.
type lambda struct {
	Name       string
	Namespace  string
	Generation int64
	Spec       spec
	// Ready is the parent's current Ready condition, nil when it has none.
	Ready *metav1.Condition
	// ConfigRevision is status.configRevision: the revision of the Secrets and
	// ConfigMaps the env reads, as the last sync saw it ("" when unset).
	ConfigRevision string
	// ServedConfig is the config revision the desired pods carry (see config.go).
	ServedConfig string
	// Pip is the operator's pip environment (Options.Pip).
	Pip []corev1.EnvVar
	// Idle is true when spec.scaleToZero is set and no request came for its
	// idleSeconds: the lambda runs no pod.
	Idle bool
}

// replicas is spec.replicas, 1 when unset, and 0 while idle.
func (l *lambda) replicas() int32 {
	if l.Idle {
		return 0
	}
	if l.Spec.Replicas == nil {
		return 1
	}
	return *l.Spec.Replicas
}

// parseParent reads and validates the parent.
func parseParent(parent hookapi.Object) (*lambda, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     spec              `json:"spec"`
	}
	if err := roundTrip(parent, &obj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidParent, err)
	}
	l := &lambda{Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace, Generation: obj.Metadata.Generation, Spec: obj.Spec}
	if l.Spec.Image == "" {
		l.Spec.Image = DefaultImage
	}
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("%w %s/%s: %v", ErrInvalidParent, l.Namespace, l.Name, err)
	}
	l.Ready = readyCondition(parent)
	l.ConfigRevision = recordedConfigRevision(parent)
	return l, nil
}

// validate refuses what would make a child the API server rejects, or a pod that
// cannot serve.
func (l *lambda) validate() error {
	s := l.Spec
	switch {
	case l.Name == "":
		return errors.New("metadata.name is empty")
	case strings.TrimSpace(s.Code) == "":
		return errors.New("spec.code is empty")
	case len(s.Code) > maxCodeBytes:
		return fmt.Errorf("spec.code has %d bytes, more than the %d a ConfigMap can hold", len(s.Code), maxCodeBytes)
	case l.replicas() < 0:
		return fmt.Errorf("spec.replicas is %d, less than 0", l.replicas())
	case strings.TrimSpace(s.Image) != s.Image:
		return fmt.Errorf("spec.image %q has surrounding spaces", s.Image)
	}
	return errors.Join(
		dnsName("spec.host", s.Host),
		dnsName("spec.ingressClassName", s.IngressClassName),
		validateEnv(s.Env),
		validateEnvFrom(s.EnvFrom),
		validateRequirements(s),
		validateResources(s.Resources),
		validateScale(s.ScaleToZero),
	)
}

func dnsName(field, value string) error {
	if value == "" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, value, strings.Join(errs, "; "))
	}
	return nil
}

func validateEnv(env []corev1.EnvVar) error {
	seen := map[string]bool{}
	for i, e := range env {
		field := fmt.Sprintf("spec.env[%d].name", i)
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s", field, e.Name, strings.Join(errs, "; "))
		}
		if reservedEnv[e.Name] {
			return fmt.Errorf("%s %q is set by the operator", field, e.Name)
		}
		if seen[e.Name] {
			return fmt.Errorf("%s %q is listed twice", field, e.Name)
		}
		seen[e.Name] = true
		if err := validateEnvSource(fmt.Sprintf("spec.env[%d]", i), e); err != nil {
			return err
		}
	}
	return nil
}

func validateResources(r corev1.ResourceRequirements) error {
	for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name := range list {
			if !resourceName(string(name)) {
				return fmt.Errorf("spec.resources: %q is not cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource", name)
			}
		}
	}
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			return fmt.Errorf("spec.resources.limits.%s is negative", name)
		}
	}
	for name, q := range r.Requests {
		if q.Sign() < 0 {
			return fmt.Errorf("spec.resources.requests.%s is negative", name)
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			return fmt.Errorf("spec.resources.requests.%s (%s) is more than its limit (%s)", name, q.String(), limit.String())
		}
	}
	return nil
}

// resourceName reports whether the API server takes name as a container resource.
func resourceName(name string) bool {
	switch {
	case name == "cpu" || name == "memory" || name == "ephemeral-storage":
		return true
	case strings.HasPrefix(name, "hugepages-"):
		return true
	default:
		return strings.Contains(name, "/") && len(validation.IsQualifiedName(name)) == 0
	}
}

// readyCondition is the parent's status Ready condition; a status it cannot read
// counts as none.
func readyCondition(parent hookapi.Object) *metav1.Condition {
	var obj struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if roundTrip(parent, &obj) != nil {
		return nil
	}
	for i, c := range obj.Status.Conditions {
		if c.Type == conditionReady {
			return &obj.Status.Conditions[i]
		}
	}
	return nil
}

// roundTrip decodes in (maps from JSON) into out through JSON.
func roundTrip(in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}
