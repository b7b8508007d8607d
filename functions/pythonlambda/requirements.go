package pythonlambda

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// spec.requirements are installed by pip, in an init container of each pod, into a
// volume the server's container imports from.
const (
	requirementsKey       = "requirements.txt"
	requirementsContainer = "requirements"
	depsVolume            = "deps"
	depsPath              = "/deps"
)

// ReasonRequirementsFailed is the Ready condition's reason when pip cannot install
// spec.requirements; the message quotes pip's error.
const ReasonRequirementsFailed = "RequirementsFailed"

// Options configure the hook for an operator: they come from the env of the
// pythonlambda Function (see OptionsFromEnv).
type Options struct {
	// Pip is the environment of every pip run: the operator's PIP_* variables, such
	// as PIP_INDEX_URL, PIP_FIND_LINKS (a wheel directory or its URL), PIP_NO_INDEX
	// and PIP_TRUSTED_HOST, which pip reads as its options.
	Pip []corev1.EnvVar
}

// OptionsFromEnv reads Options from a Function's env: every variable named PIP_*.
func OptionsFromEnv(env map[string]string) Options {
	var o Options
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if strings.HasPrefix(name, "PIP_") {
			o.Pip = append(o.Pip, corev1.EnvVar{Name: name, Value: env[name]})
		}
	}
	return o
}

// installer is the init container that installs spec.requirements, nil without
// them. Its log's end is its termination message when it fails: pip's error.
func installer(l *lambda) *corev1.Container {
	if strings.TrimSpace(l.Spec.Requirements) == "" {
		return nil
	}
	env := append([]corev1.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "1"}}, l.Pip...)
	return &corev1.Container{
		Name:  requirementsContainer,
		Image: l.Spec.Image,
		Command: []string{"python3", "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
			"--no-warn-script-location", "--target", depsPath, "-r", mountPath + "/" + requirementsKey},
		Env:       env,
		Resources: l.Spec.Resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeName, MountPath: mountPath, ReadOnly: true},
			{Name: depsVolume, MountPath: depsPath},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// withRequirements adds the installer, the volume it fills and its import path to
// a pod spec.
func withRequirements(l *lambda, ps corev1.PodSpec) corev1.PodSpec {
	init := installer(l)
	if init == nil {
		return ps
	}
	ps.InitContainers = []corev1.Container{*init}
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: depsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &ps.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "PYTHONPATH", Value: depsPath})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: depsVolume, MountPath: depsPath, ReadOnly: true})
	return ps
}

// validateRequirements refuses what pip cannot read or the pods cannot hold.
func validateRequirements(s spec) error {
	if strings.TrimSpace(s.Requirements) == "" {
		return nil
	}
	if size := len(s.Code) + len(s.Requirements); size > maxCodeBytes {
		return fmt.Errorf("spec.code and spec.requirements have %d bytes, more than the %d a ConfigMap can hold", size, maxCodeBytes)
	}
	if strings.ContainsRune(s.Requirements, 0) {
		return fmt.Errorf("spec.requirements holds a NUL byte")
	}
	for _, e := range s.Env {
		if e.Name == "PYTHONPATH" {
			return fmt.Errorf("spec.env PYTHONPATH is set by the operator when spec.requirements is set (to %s)", depsPath)
		}
	}
	return nil
}

// installFailure is the reason and detail when the pod's installer failed, or "".
func installFailure(p *corev1.Pod) (reason, detail string) {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name != requirementsContainer {
			continue
		}
		// The current run's end, else the previous run's while pip is retried.
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			return "", ""
		}
		msg := cmp.Or(strings.TrimSpace(t.Message), "(no output)")
		return ReasonRequirementsFailed, fmt.Sprintf("pip cannot install spec.requirements (exit code %d): %s", t.ExitCode, tail(msg, maxTermination))
	}
	return "", ""
}
