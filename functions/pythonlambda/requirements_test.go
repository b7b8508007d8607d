package pythonlambda

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/metalambda/metalambda/internal/hookapi"
)

const pipError = "ERROR: Could not find a version that satisfies the requirement nosuchpkg (from versions: none)\nERROR: No matching distribution found for nosuchpkg"

func TestRequirementsPod(t *testing.T) {
	opts := OptionsFromEnv(map[string]string{"PIP_FIND_LINKS": "http://wheels.local/", "PIP_NO_INDEX": "1", "OTHER": "x"})
	resp, err := syncWith(&hookapi.CompositeRequest{Parent: parent(withSpec("requirements", "tinypkg==1.0\n"))}, opts, now)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	var pod corev1.Pod
	for _, c := range resp.Children {
		switch c["kind"] {
		case "ConfigMap":
			mustRoundTrip(t, c, &cm)
		case "Pod":
			mustRoundTrip(t, c, &pod)
		}
	}
	if cm.Data[requirementsKey] != "tinypkg==1.0\n" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %+v", pod.Spec.InitContainers)
	}
	init := pod.Spec.InitContainers[0]
	wantEnv := []corev1.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "1"}, {Name: "PIP_FIND_LINKS", Value: "http://wheels.local/"}, {Name: "PIP_NO_INDEX", Value: "1"}}
	if diff := cmp.Diff(wantEnv, init.Env); diff != "" {
		t.Errorf("installer env (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(init.Command, " "), "pip install") || init.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("installer %+v", init)
	}
	main := pod.Spec.Containers[0]
	if !hasEnv(main.Env, "PYTHONPATH") || len(main.VolumeMounts) != 2 {
		t.Errorf("server container env %v mounts %v", main.Env, main.VolumeMounts)
	}
	// Without requirements, neither the installer nor its volume.
	plain, err := syncWith(&hookapi.CompositeRequest{Parent: parent()}, opts, now)
	if err != nil {
		t.Fatal(err)
	}
	if s := toJSON(t, plain.Children); strings.Contains(s, "initContainers") || strings.Contains(s, "PIP_") {
		t.Errorf("a lambda without requirements got an installer: %s", s)
	}
}

func TestRequirementsFailure(t *testing.T) {
	p := parent(withSpec("requirements", "nosuchpkg\n"))
	failed := func(string) *corev1.PodStatus {
		return &corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
			Name:                 requirementsContainer,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "Collecting nosuchpkg\n" + pipError}},
		}}}
	}
	resp, err := syncAt(&hookapi.CompositeRequest{Parent: p, Children: observedOf(t, p, false, failed)}, now)
	if err != nil {
		t.Fatal(err)
	}
	cond := toMap(t, resp.Status)["conditions"].([]any)[0].(map[string]any)
	if cond["reason"] != ReasonRequirementsFailed || !strings.Contains(cond["message"].(string), "pip cannot install spec.requirements (exit code 1)") ||
		!strings.Contains(cond["message"].(string), "No matching distribution found for nosuchpkg") {
		t.Errorf("condition %v", cond)
	}
}

func TestRequirementsInvalid(t *testing.T) {
	_, err := Sync(&hookapi.CompositeRequest{Parent: parent(withSpec("requirements", "x\n"), withSpec("env", []any{map[string]any{"name": "PYTHONPATH", "value": "/x"}}))})
	if err == nil || !strings.Contains(err.Error(), "spec.env PYTHONPATH is set by the operator") {
		t.Errorf("Sync = %v", err)
	}
}

func mustRoundTrip(t *testing.T, in, out any) {
	t.Helper()
	if err := roundTrip(in, out); err != nil {
		t.Fatal(err)
	}
}
