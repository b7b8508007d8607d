package pythonlambda

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// The clock of the tests: now, and the time of an earlier transition.
var (
	now     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	earlier = "2025-12-01T00:00:00Z"
)

// sampleCode is the code of the example.
const sampleCode = `name = query_params.get("name", ["World"])[0]
reverse_name = name[::-1]
output = "Hello %s! Your name in reverse is %s" % (name, reverse_name)
`

type parentOpt func(obj hookapi.Object)

// parent is the example (replicas 2, host example.com) as the API server
// stores it, changed by opts.
func parent(opts ...parentOpt) hookapi.Object {
	obj := hookapi.Object{
		"apiVersion": "example.com/v1",
		"kind":       "PythonLambda",
		"metadata": map[string]any{
			"name": "demo-python-lambda", "namespace": "python-lambda-operator",
			"uid": "6f1d7b52-0c1e-4bd4-9a65-3f0f3c1d2e01", "generation": 1, "resourceVersion": "100",
			"creationTimestamp": "2025-12-01T00:00:00Z",
		},
		"spec": map[string]any{"code": sampleCode, "replicas": 2, "host": "example.com", "image": DefaultImage},
	}
	for _, opt := range opts {
		opt(obj)
	}
	return obj
}

func withSpec(key string, value any) parentOpt {
	return func(obj hookapi.Object) { obj["spec"].(map[string]any)[key] = value }
}

func withoutSpec(key string) parentOpt {
	return func(obj hookapi.Object) { delete(obj["spec"].(map[string]any), key) }
}

func withName(name string) parentOpt {
	return func(obj hookapi.Object) { obj["metadata"].(map[string]any)["name"] = name }
}

func withGeneration(g int) parentOpt {
	return func(obj hookapi.Object) { obj["metadata"].(map[string]any)["generation"] = g }
}

// withReady gives the parent a status with a Ready condition of that status since
// the earlier time.
func withReady(status metav1.ConditionStatus, reason string) parentOpt {
	return func(obj hookapi.Object) {
		obj["status"] = map[string]any{"conditions": []any{map[string]any{
			"type": conditionReady, "status": string(status), "reason": reason, "message": "before",
			"lastTransitionTime": earlier, "observedGeneration": 1,
		}}}
	}
}

// podStatus sets the observed status of the pod with that name.
type podStatus func(name string) *corev1.PodStatus

// observedOf is what the engine would observe after applying the children Sync
// answers for p: each child with server fields, pods with the status st gives them
// (none when st or its answer is nil). v2 keys objects "namespace/name".
func observedOf(t *testing.T, p hookapi.Object, v2 bool, st podStatus) hookapi.Objects {
	t.Helper()
	resp, err := syncAt(&hookapi.CompositeRequest{Parent: p}, now)
	if err != nil {
		t.Fatalf("sync the parent the children come from: %v", err)
	}
	out := hookapi.Objects{configMapKey: {}, serviceKey: {}, ingressKey: {}, podKey: {}}
	for _, child := range resp.Children {
		obj := observe1(t, child)
		meta := obj["metadata"].(map[string]any)
		name, kind := meta["name"].(string), obj["kind"].(string)
		if kind == "Pod" && st != nil {
			if s := st(name); s != nil {
				obj["status"] = toMap(t, s)
			}
		}
		key := name
		if v2 {
			key = meta["namespace"].(string) + "/" + name
		}
		out[hookapi.TypeKey(kind, obj["apiVersion"].(string))][key] = obj
	}
	return out
}

// observe1 adds what the API server adds to a created child.
func observe1(t *testing.T, child hookapi.Object) hookapi.Object {
	obj := toMap(t, child)
	meta := obj["metadata"].(map[string]any)
	meta["uid"] = "uid-" + meta["name"].(string)
	meta["resourceVersion"] = "200"
	meta["creationTimestamp"] = "2025-12-01T00:00:01Z"
	meta["ownerReferences"] = []any{map[string]any{
		"apiVersion": "example.com/v1", "kind": "PythonLambda", "name": "demo-python-lambda",
		"uid": "6f1d7b52-0c1e-4bd4-9a65-3f0f3c1d2e01", "controller": true, "blockOwnerDeletion": true,
	}}
	return obj
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	var out map[string]any
	body, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(body, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Pod statuses.

func allReady(string) *corev1.PodStatus { return readyStatus() }

func readyStatus() *corev1.PodStatus {
	return &corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: containerName, Image: DefaultImage, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}},
	}
}

func runningNotReady() *corev1.PodStatus {
	s := readyStatus()
	s.Conditions[1].Status = corev1.ConditionFalse
	s.Conditions[2].Status = corev1.ConditionFalse
	s.ContainerStatuses[0].Ready = false
	return s
}

func pending(reason string) *corev1.PodStatus {
	return &corev1.PodStatus{
		Phase:      corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: containerName, Image: DefaultImage,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "Back-off pulling image \"" + DefaultImage + "\""}},
		}},
	}
}

func crashLoop(message string) *corev1.PodStatus {
	s := runningNotReady()
	s.ContainerStatuses[0].RestartCount = 4
	s.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container=lambda",
	}}
	s.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: message,
	}}
	return s
}

func unschedulable() *corev1.PodStatus {
	return &corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient memory.",
		}},
	}
}

// only gives the pod name the status s, and the others ready.
func only(name string, s *corev1.PodStatus) podStatus {
	return func(n string) *corev1.PodStatus {
		if n == name {
			return s
		}
		return readyStatus()
	}
}
