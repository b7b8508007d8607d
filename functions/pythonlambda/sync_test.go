package pythonlambda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/kmeta"

	"github.com/metalambda/metalambda/functions/internal/golden"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// summary is what each case asserts beyond its golden response.
type summary struct {
	Children      []string // kind/name in order
	ReadyReplicas float64
	Pods          float64 // observed pods
	Ready         string  // status of the Ready condition
	Reason        string
	Message       string // a part of the message
	Transition    string // lastTransitionTime
}

const demoPods = "Pod/demo-python-lambda-0 Pod/demo-python-lambda-1"

func TestSync(t *testing.T) {
	newCode := withSpec("code", `output = "v2"`)
	tests := []struct {
		name string
		req  func(t *testing.T) *hookapi.CompositeRequest
		want summary
	}{{
		name: "fresh",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: hookapi.Objects{configMapKey: {}, serviceKey: {}, ingressKey: {}, podKey: {}}}
		},
		want: summary{Children: demoChildren(demoPods), Ready: "False", Reason: ReasonCreating,
			Message:    "waiting for ConfigMap " + codeMap("demo-python-lambda", sampleCode) + ", Service demo-python-lambda-svc, Ingress demo-python-lambda-ingress, Pod demo-python-lambda-0, Pod demo-python-lambda-1 to be created",
			Transition: now.Format(time.RFC3339)},
	}, {
		name: "steady",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(withReady(metav1.ConditionTrue, ReasonAllPodsReady)), Children: observedOf(t, parent(), false, allReady)}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 2, Pods: 2, Ready: "True", Reason: ReasonAllPodsReady,
			Message: "2 of 2 pods are ready", Transition: earlier},
	}, {
		name: "steady-hook-v2",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: observedOf(t, parent(), true, allReady)}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 2, Pods: 2, Ready: "True", Reason: ReasonAllPodsReady,
			Message: "2 of 2 pods are ready", Transition: now.Format(time.RFC3339)},
	}, {
		name: "code-change",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{
				Parent:   parent(newCode, withGeneration(2), withReady(metav1.ConditionTrue, ReasonAllPodsReady)),
				Children: withConfigMapsOf(t, observedOf(t, parent(), false, allReady), parent(newCode)),
			}
		},
		// The old pods keep their ConfigMap, and the surge pod serves the new code
		// while the engine replaces them.
		want: summary{Children: []string{
			"ConfigMap/" + codeMap("demo-python-lambda", `output = "v2"`), "ConfigMap/" + codeMap("demo-python-lambda", sampleCode),
			"Service/demo-python-lambda-svc", "Ingress/demo-python-lambda-ingress",
			"Pod/demo-python-lambda-surge", "Pod/demo-python-lambda-0", "Pod/demo-python-lambda-1",
		}, Pods: 2, Ready: "False", Reason: ReasonUpdating,
			Message: "replacing 2 of 2 pods", Transition: now.Format(time.RFC3339)},
	}, {
		name: "scale-down",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{
				Parent:   parent(withSpec("replicas", 1), withReady(metav1.ConditionTrue, ReasonAllPodsReady)),
				Children: observedOf(t, parent(), false, allReady),
			}
		},
		want: summary{Children: demoChildren("Pod/demo-python-lambda-0"), ReadyReplicas: 1, Pods: 2, Ready: "True", Reason: ReasonAllPodsReady,
			Message: "1 of 1 pods are ready", Transition: earlier},
	}, {
		name: "scale-to-zero",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(withSpec("replicas", 0)), Children: observedOf(t, parent(), false, allReady)}
		},
		want: summary{Children: demoChildren(""), Pods: 2, Ready: "True", Reason: ReasonScaledToZero,
			Message: "spec.replicas is 0", Transition: now.Format(time.RFC3339)},
	}, {
		name: "crashing-pod",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			crash := crashLoop("Traceback (most recent call last):\n  File \"/lambda/script.py\", line 1\nMemoryError")
			return &hookapi.CompositeRequest{
				Parent:   parent(withReady(metav1.ConditionTrue, ReasonAllPodsReady)),
				Children: observedOf(t, parent(), false, only("demo-python-lambda-1", crash)),
			}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 1, Pods: 2, Ready: "False", Reason: ReasonPodCrashing,
			Message:    "demo-python-lambda-1 (container lambda is in CrashLoopBackOff; last terminated with exit code 1 (Error): Traceback (most recent call last):\n  File \"/lambda/script.py\", line 1\nMemoryError)",
			Transition: now.Format(time.RFC3339)},
	}, {
		name: "syntax-error-not-ready",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			p := parent(withSpec("code", "output = (\n"), withReady(metav1.ConditionFalse, ReasonPodsStarting))
			return &hookapi.CompositeRequest{Parent: p, Children: observedOf(t, p, false, func(string) *podStatusT { return runningNotReady() })}
		},
		want: summary{Children: append([]string{"ConfigMap/" + codeMap("demo-python-lambda", "output = (\n")}, demoChildren(demoPods)[1:]...), Pods: 2, Ready: "False", Reason: ReasonPodsNotReady,
			Message: "2 of 2 pods run but are not ready: GET /healthz fails, as it does while spec.code has a syntax error (the pod's log shows it): demo-python-lambda-0; demo-python-lambda-1", Transition: earlier},
	}, {
		name: "pods-starting",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: observedOf(t, parent(), false, func(string) *podStatusT { return pending("ContainerCreating") })}
		},
		want: summary{Children: demoChildren(demoPods), Pods: 2, Ready: "False", Reason: ReasonPodsStarting,
			Message: "2 of 2 pods are starting: demo-python-lambda-0 (ContainerCreating); demo-python-lambda-1 (ContainerCreating)", Transition: now.Format(time.RFC3339)},
	}, {
		name: "image-pull-failed",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: observedOf(t, parent(), false, only("demo-python-lambda-0", pending("ImagePullBackOff")))}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 1, Pods: 2, Ready: "False", Reason: ReasonImagePullFailed,
			Message: "container lambda cannot pull image python:3.11-slim: ImagePullBackOff", Transition: now.Format(time.RFC3339)},
	}, {
		name: "unschedulable",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: observedOf(t, parent(), false, only("demo-python-lambda-1", unschedulable()))}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 1, Pods: 2, Ready: "False", Reason: ReasonPodUnschedulable,
			Message: "Insufficient memory", Transition: now.Format(time.RFC3339)},
	}, {
		name: "options",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			p := parent(withoutSpec("replicas"), withoutSpec("host"), withSpec("image", "python:3.12-alpine"),
				withSpec("env", []any{map[string]any{"name": "GREETING", "value": "Hi"}, map[string]any{"name": "PYTHONUNBUFFERED", "value": "0"}}),
				withSpec("resources", map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}, "limits": map[string]any{"memory": "128Mi"}}),
				withSpec("ingressClassName", "nginx"))
			return &hookapi.CompositeRequest{Parent: p}
		},
		want: summary{Children: demoChildren("Pod/demo-python-lambda-0"), Ready: "False", Reason: ReasonCreating, Transition: now.Format(time.RFC3339)},
	}, {
		name: "dotted-long-name",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			name := "lambda.v2.with-a-rather-long-name-that-does-not-fit-in-a-label-at-all"
			return &hookapi.CompositeRequest{Parent: parent(withName(name), withSpec("replicas", 1))}
		},
		want: summary{Children: []string{
			"ConfigMap/" + codeMap("lambda.v2.with-a-rather-long-name-that-does-not-fit-in-a-label-at-all", sampleCode),
			"Service/x-lambda-v2-with-a-rather-l6eab23779e9cf4039a383180102bf9e4-svc",
			"Ingress/lambda.v2.with-a-rather07a52daea8c38f82826b34b18e31c14b-ingress",
			"Pod/lambda.v2.with-a-rather-long-07a52daea8c38f82826b34b18e31c14b-0",
		}, Ready: "False", Reason: ReasonCreating, Transition: now.Format(time.RFC3339)},
	}, {
		name: "finalizing",
		req: func(t *testing.T) *hookapi.CompositeRequest {
			return &hookapi.CompositeRequest{Parent: parent(), Children: observedOf(t, parent(), false, allReady), Finalizing: true}
		},
		want: summary{Children: demoChildren(demoPods), ReadyReplicas: 2, Pods: 2, Ready: "True", Reason: ReasonAllPodsReady,
			Message: "2 of 2 pods are ready", Transition: now.Format(time.RFC3339)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := golden.Request(t, tt.name+".request.json", tt.req(t))
			resp, err := syncAt(req, now)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			golden.Compare(t, tt.name+".response.json", resp)
			if diff := cmp.Diff(tt.want, summarize(t, resp, tt.want.Message)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

type podStatusT = corev1.PodStatus

func demoChildren(pods string) []string {
	out := []string{"ConfigMap/" + codeMap("demo-python-lambda", sampleCode), "Service/demo-python-lambda-svc", "Ingress/demo-python-lambda-ingress"}
	if pods != "" {
		out = append(out, strings.Fields(pods)...)
	}
	return out
}

// withConfigMapsOf adds to obs the ConfigMaps the engine would have created for p.
func withConfigMapsOf(t *testing.T, obs hookapi.Objects, p hookapi.Object) hookapi.Objects {
	for k, v := range observedOf(t, p, false, nil)[configMapKey] {
		obs[configMapKey][k] = v
	}
	return obs
}

// codeMap is the name of the ConfigMap of a lambda's code: its name, "-code-" and a
// hash of the files, at most 63 characters.
func codeMap(name, code string) string {
	return kmeta.ChildName(name, "-code-"+filesHash(map[string]string{scriptKey: script, codeKey: code}))
}

// summarize reads the summary of resp; Message is kept when the condition's message
// contains part.
func summarize(t *testing.T, resp *hookapi.CompositeResponse, part string) summary {
	t.Helper()
	var s summary
	for _, c := range resp.Children {
		s.Children = append(s.Children, c["kind"].(string)+"/"+c["metadata"].(map[string]any)["name"].(string))
	}
	st := toMap(t, resp.Status)
	s.ReadyReplicas, s.Pods = st["readyReplicas"].(float64), st["pods"].(float64)
	cond := st["conditions"].([]any)[0].(map[string]any)
	s.Ready, s.Reason, s.Transition = cond["status"].(string), cond["reason"].(string), cond["lastTransitionTime"].(string)
	if msg := cond["message"].(string); strings.Contains(msg, part) {
		s.Message = part
	} else {
		s.Message = msg
	}
	return s
}

func TestSyncInvalidParent(t *testing.T) {
	tests := []struct {
		name string
		opt  parentOpt
		want string
	}{
		{"no code", withoutSpec("code"), "spec.code is empty"},
		{"blank code", withSpec("code", " \n\t"), "spec.code is empty"},
		{"code not a string", withSpec("code", 42), "cannot unmarshal number"},
		{"huge code", withSpec("code", strings.Repeat("#", maxCodeBytes+1)), "more than the"},
		{"negative replicas", withSpec("replicas", -1), "spec.replicas is -1"},
		{"fractional replicas", withSpec("replicas", 1.5), "cannot unmarshal number 1.5"},
		{"bad host", withSpec("host", "Example.com/x"), `spec.host "Example.com/x"`},
		{"bad ingress class", withSpec("ingressClassName", "a b"), "spec.ingressClassName"},
		{"image with spaces", withSpec("image", " python:3 "), "surrounding spaces"},
		{"reserved env", withSpec("env", []any{map[string]any{"name": "PORT", "value": "1"}}), `spec.env[0].name "PORT" is set by the operator`},
		{"env without name", withSpec("env", []any{map[string]any{"value": "1"}}), `spec.env[0].name ""`},
		{"env twice", withSpec("env", []any{map[string]any{"name": "A"}, map[string]any{"name": "A"}}), `spec.env[1].name "A" is listed twice`},
		{"bad quantity", withSpec("resources", map[string]any{"limits": map[string]any{"cpu": "lots"}}), "quantities must match"},
		{"request over limit", withSpec("resources", map[string]any{"limits": map[string]any{"cpu": "1"}, "requests": map[string]any{"cpu": "2"}}), "spec.resources.requests.cpu (2) is more than its limit (1)"},
		{"unknown resource", withSpec("resources", map[string]any{"limits": map[string]any{"gpu": "1"}}), `spec.resources: "gpu" is not cpu`},
		{"no name", withName(""), "metadata.name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Sync(&hookapi.CompositeRequest{Parent: parent(tt.opt)})
			if !errors.Is(err, ErrInvalidParent) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Sync = %v, %v; want an ErrInvalidParent containing %q", resp, err, tt.want)
			}
		})
	}
}

// TestSteadyStateKeepsStatus feeds the status Sync answers back: the next answer is
// the same, so the engine does not write the status again.
func TestSteadyStateKeepsStatus(t *testing.T) {
	children := observedOf(t, parent(), false, allReady)
	first, err := syncAt(&hookapi.CompositeRequest{Parent: parent(), Children: children}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := parent()
	p["status"] = toMap(t, first.Status)
	second, err := Sync(&hookapi.CompositeRequest{Parent: p, Children: children})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toMap(t, first.Status), toMap(t, second.Status)); diff != "" {
		t.Errorf("status changed in steady state (-first +second):\n%s", diff)
	}
}

// TestSpecHash checks that only a change of what the pods run changes the spec-hash.
func TestSpecHash(t *testing.T) {
	hashOf := func(opts ...parentOpt) string {
		t.Helper()
		resp, err := syncAt(&hookapi.CompositeRequest{Parent: parent(opts...)}, now)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Children[3]["metadata"].(map[string]any)["annotations"].(map[string]any)[SpecHashAnnotation].(string)
	}
	base := hashOf()
	tests := []struct {
		name    string
		opt     parentOpt
		changes bool
	}{
		{"same", withSpec("code", sampleCode), false},
		{"replicas", withSpec("replicas", 5), false},
		{"host", withSpec("host", "other.example.com"), false},
		{"ingress class", withSpec("ingressClassName", "nginx"), false},
		{"code", withSpec("code", sampleCode+"\n"), true},
		{"image", withSpec("image", "python:3.12"), true},
		{"env", withSpec("env", []any{map[string]any{"name": "A", "value": "1"}}), true},
		{"resources", withSpec("resources", map[string]any{"limits": map[string]any{"memory": "1Gi", "example.com/fpga": "1"}}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hashOf(tt.opt) != base; got != tt.changes {
				t.Errorf("hash changed = %v, want %v", got, tt.changes)
			}
		})
	}
}

func TestServiceName(t *testing.T) {
	tests := []struct{ parent, want string }{
		{"demo", "demo-svc"},
		{"a.b", "x-a-b-2e7336dc-svc"},
		{"1abc", "x-1abc-57cb980e-svc"},
	}
	for _, tt := range tests {
		if got := serviceName(tt.parent); got != tt.want {
			t.Errorf("serviceName(%q) = %q, want %q", tt.parent, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s, head, tail string
		limit         int
	}{
		{"short", "short", "short", 10},
		{"abcdefghij", "abcde…", "…fghij", 8},
		{"ééééé", "é…", "…é", 6},
	}
	for _, tt := range tests {
		if got := truncate(tt.s, tt.limit); got != tt.head {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.head)
		}
		if got := tail(tt.s, tt.limit); got != tt.tail {
			t.Errorf("tail(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.tail)
		}
	}
}
