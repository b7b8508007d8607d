//go:build integration

package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// hookEventsOf lists the events recorded on the parent name that came from source.
func hookEventsOf(t *testing.T, ns, name, source string) []corev1.Event {
	t.Helper()
	var out []corev1.Event
	for _, e := range env.Events(t, ns, "", name) {
		if e.Source.Component == source {
			out = append(out, e)
		}
	}
	return out
}

// waitForEvent waits until the object name has an event of source and reason whose
// message contains text, and returns it.
func waitForEvent(t *testing.T, ns, name, source, reason, text string) corev1.Event {
	t.Helper()
	var found corev1.Event
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("a %s event %s from %s", reason, text, source), func(context.Context) (bool, error) {
		for _, e := range hookEventsOf(t, ns, name, source) {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// withEvents wraps a hook so that its answer for the parent named parent carries
// events.
func withEvents(respond func(map[string]any) (int, any), parent string, events ...map[string]any) func(map[string]any) (int, any) {
	return func(req map[string]any) (int, any) {
		code, resp := respond(req)
		obj, _ := req["parent"].(map[string]any)
		if obj == nil {
			obj, _ = req["object"].(map[string]any)
		}
		if m, ok := resp.(map[string]any); ok && field(obj, "metadata", "name") == parent {
			list := make([]any, len(events))
			for i, e := range events {
				list[i] = e
			}
			m["events"] = list
		}
		return code, resp
	}
}

func TestHookEventsAreRecordedOnTheParent(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, withEvents(echoChildren("v"), "p",
		map[string]any{"type": "Normal", "reason": "ChildrenWanted", "message": "p wants one ConfigMap and a Service"},
		map[string]any{"type": "Warning", "reason": "QuotaLow", "message": "only 2 of 10 ConfigMaps left in the quota"},
		map[string]any{"reason": "TypeLeftOut", "message": "an event without a type is Normal"},
	))
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 0, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	create(t, parentsGVR, ns, parentManifest, "quiet", 1)

	source := HookEventSource(CompositeKind, ns)
	if source != "compositecontroller/"+ns {
		t.Fatalf("HookEventSource = %q", source)
	}
	want := map[string]string{"ChildrenWanted": "Normal", "QuotaLow": "Warning", "TypeLeftOut": "Normal"}
	for reason, typ := range want {
		e := waitForEvent(t, ns, "p", source, reason, "")
		if e.Type != typ || e.ReportingController != source || e.InvolvedObject.Kind != "Parent" {
			t.Errorf("%s: type %s, reportingController %q, involved %s; want %s from %s on the Parent", reason, e.Type, e.ReportingController, e.InvolvedObject.Kind, typ, source)
		}
	}
	if e := waitForEvent(t, ns, "p", source, "QuotaLow", ""); e.Message != "only 2 of 10 ConfigMaps left in the quota" {
		t.Errorf("QuotaLow message = %q", e.Message)
	}
	// The sync itself went as without events.
	env.WaitFor(t, "p's children exist", configMapsGVR, ns, "p-0", nil)

	// `kubectl get events --field-selector source=...` tells the controller's events
	// from the engine's own.
	bySource := func(selector string) []corev1.Event {
		list, err := env.Kube.CoreV1().Events(ns).List(kubetest.Context(t), metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	if got := bySource("source=" + source); len(got) != len(want) {
		t.Errorf("source=%s lists %d events, want %d: %v", source, len(got), len(want), reasons(got))
	}
	for _, e := range bySource("source=" + EventSource) {
		if _, ok := want[e.Reason]; ok {
			t.Errorf("source=%s lists the hook's event %s", EventSource, e.Reason)
		}
	}

	// A parent whose answers carry no events gets none but the engine's own.
	env.WaitFor(t, "quiet's status is written", parentsGVR, ns, "quiet", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "configMaps") != int64(1) {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	time.Sleep(time.Second) // events are written asynchronously
	for _, e := range env.Events(t, ns, "", "quiet") {
		if e.Source.Component != EventSource {
			t.Errorf("an answer without events recorded %s %s from %q", e.Type, e.Reason, e.Source.Component)
		}
	}
}

func reasons(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}

// TestHookEventsAreBounded has a hook answer 100 events at every call: each answer
// gives at most 10, and the recorder's burst bounds them all.
func TestHookEventsAreBounded(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	const burst = 15
	startEngine(t, ns, func(o *Options) { o.EventsBurst = burst })
	var hook *hookServer
	hook = newHookServer(t, func(req map[string]any) (int, any) {
		calls := hook.calls.Load() // counted before the answer
		var events []any
		for i := range 100 {
			events = append(events, map[string]any{"reason": fmt.Sprintf("Call%dEvent%d", calls, i), "message": "one of a hundred"})
		}
		return 200, map[string]any{"status": map[string]any{}, "events": events}
	})
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 0)

	source := HookEventSource(CompositeKind, ns)
	kubetest.Eventually(t, 30*time.Second, "the first answer's 10 events and 3 more calls", func(context.Context) (bool, error) {
		return len(hookEventsOf(t, ns, "p", source)) >= hookapi.MaxEvents && hook.calls.Load() >= 4, nil
	})
	waitForEvent(t, ns, "p", EventSource, ReasonInvalidHookEvents, "90 events past the first 10 were dropped")
	time.Sleep(time.Second) // let the last events be written, if any were let through
	got := hookEventsOf(t, ns, "p", source)
	t.Logf("%d hook events recorded after %d answers of 100", len(got), hook.calls.Load())
	if len(got) > burst {
		t.Errorf("%d hook events recorded after %d answers of 100, want at most the burst of %d", len(got), hook.calls.Load(), burst)
	}
	for _, e := range got {
		var call, i int
		if _, err := fmt.Sscanf(e.Reason, "Call%dEvent%d", &call, &i); err != nil || i >= hookapi.MaxEvents {
			t.Errorf("recorded %s: past the first %d of its answer", e.Reason, hookapi.MaxEvents)
		}
	}
}

// TestInvalidHookEventsDoNotStopTheSync answers invalid events beside valid ones: the
// children are managed as usual, the valid event is recorded and the engine reports
// the others. An answer refused for its children still has its events recorded.
func TestInvalidHookEventsDoNotStopTheSync(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	respond := withEvents(echoChildren("v"), "p",
		map[string]any{"type": "Info", "reason": "BadType"},
		map[string]any{"type": "Normal", "reason": ""},
		map[string]any{"type": "Normal", "reason": "Fine", "message": "this one is recorded"},
		map[string]any{"type": "Warning", "reason": "not camel case"},
	)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		if field(req["parent"].(map[string]any), "metadata", "name") != "refused" {
			return respond(req)
		}
		// A child of a type the controller does not declare: the answer is refused.
		return 200, map[string]any{
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}},
			"events":   []any{map[string]any{"type": "Warning", "reason": "SecretWanted", "message": "asked for a Secret"}},
		}
	})
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 0, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	create(t, parentsGVR, ns, parentManifest, "refused", 1)

	env.WaitFor(t, "p's children exist", configMapsGVR, ns, "p-1", nil)
	env.WaitFor(t, "p's status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "configMaps") != int64(2) {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	source := HookEventSource(CompositeKind, ns)
	waitForEvent(t, ns, "p", source, "Fine", "this one is recorded")
	report := waitForEvent(t, ns, "p", EventSource, ReasonInvalidHookEvents, `events[0]: type "Info" is not Normal or Warning`)
	for _, part := range []string{"the sync hook", "events[1]: reason is empty", `events[3]: reason "not camel case" is not UpperCamelCase`} {
		if !strings.Contains(report.Message, part) {
			t.Errorf("the report %q does not say %q", report.Message, part)
		}
	}
	if report.Type != corev1.EventTypeWarning {
		t.Errorf("the report is %s, want Warning", report.Type)
	}
	if got := hookEventsOf(t, ns, "p", source); len(got) != 1 {
		t.Errorf("hook events on p: %v, want Fine alone", reasons(got))
	}

	waitForEvent(t, ns, "refused", EventSource, "SyncError", "not a declared child resource")
	waitForEvent(t, ns, "refused", source, "SecretWanted", "asked for a Secret")
}

func TestDecoratorHookEvents(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, withEvents(func(map[string]any) (int, any) {
		return 200, map[string]any{"labels": map[string]any{"decorated": "true"}}
	}, "target", map[string]any{"type": "Warning", "reason": "OwnerMissing", "message": "example.com/team names no team"}))
	create(t, dcGVR, "", decoratorManifest, ns, hook.URL)
	create(t, parentsGVR, ns, `
apiVersion: test.metalambda.dev/v1
kind: Parent
metadata:
  name: target
  labels: {decorate: "yes"}
  annotations: {example.com/team: ""}
spec: {}
`)
	env.WaitFor(t, "the target is decorated", parentsGVR, ns, "target", func(o *unstructured.Unstructured) error {
		if o.GetLabels()["decorated"] != "true" {
			return fmt.Errorf("labels = %v", o.GetLabels())
		}
		return nil
	})
	source := HookEventSource(DecoratorKind, ns)
	e := waitForEvent(t, ns, "target", source, "OwnerMissing", "names no team")
	if e.Type != corev1.EventTypeWarning || source != "decoratorcontroller/"+ns {
		t.Errorf("event %s from %s, want a Warning from decoratorcontroller/%s", e.Type, source, ns)
	}
}

// TestFinalizeHookEvents: the finalize hook's events are recorded too, also by the
// answer that lets the parent go.
func TestFinalizeHookEvents(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		if req["finalizing"] == true {
			return 200, map[string]any{"finalized": true, "events": []any{
				map[string]any{"reason": "CleanedUp", "message": "removed the external record"},
				map[string]any{"type": "Bad", "reason": "Oops"},
			}}
		}
		return 200, map[string]any{"children": []any{configMap("p-data", map[string]any{"k": "v"}, nil)}}
	})
	create(t, ccGVR, "", finalizerCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the child exists", configMapsGVR, ns, "p-data", nil)
	if err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Delete(kubetest.Context(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "the parent is deleted once finalized", parentsGVR, ns, "p")
	waitForEvent(t, ns, "p", HookEventSource(CompositeKind, ns), "CleanedUp", "removed the external record")
	waitForEvent(t, ns, "p", EventSource, ReasonInvalidHookEvents, `the finalize hook answered events that were not recorded: events[1]: type "Bad"`)
}
