//go:build integration

package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// A hook sees its own status: a status write that changed the parent's status leads
// to one more sync, as upstream's updateParentObject does, unless ignoreStatusChanges.

const readyAnnotation = "test.metalambda.dev/ready"

// jobLike answers like upstream's DaemonJob: a child, a status that says Complete once
// the child is ready, and no child once it sees Complete in its own status.
func jobLike(req map[string]any) (int, any) {
	parent := req["parent"].(map[string]any)
	name := field(parent, "metadata", "name").(string)
	if field(parent, "status", "complete") == true {
		return 200, map[string]any{"status": map[string]any{"complete": true}, "children": []any{}}
	}
	child, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)[name+"-work"].(map[string]any)
	ready := child != nil && field(child, "metadata", "annotations", readyAnnotation) == "true"
	return 200, map[string]any{
		"status":   map[string]any{"complete": ready},
		"children": []any{configMap(name+"-work", map[string]any{"k": "v"}, nil)},
	}
}

// TestHookSeesItsOwnStatus: the child of a job-like parent is deleted once the hook
// has seen its own Complete status.
func TestHookSeesItsOwnStatus(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, jobLike)
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-work", nil)
	annotate(t, configMapsGVR, ns, "p-work", readyAnnotation, "true")
	env.WaitFor(t, "the parent is complete", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "complete"); got != true {
			return fmt.Errorf("status.complete = %v", got)
		}
		return nil
	})
	env.WaitGone(t, "the hook sees Complete in its status and drops the child", configMapsGVR, ns, "p-work")
}

// constantStatus answers one status whatever it is shown, and no children.
func constantStatus(map[string]any) (int, any) {
	return 200, map[string]any{"status": map[string]any{"phase": "done"}, "children": []any{}}
}

// TestConstantStatusIsAFixedPoint: a hook answering a constant status is called once
// to write it and once to see it; then it writes nothing and nothing wakes it until
// someone else changes the parent.
func TestConstantStatusIsAFixedPoint(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, constantStatus)
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	hook.waitForStatus(t, "phase", "done")
	annotate(t, parentsGVR, ns, "p", "example.com/touched", "yes")
	hook.waitForAnnotation(t, "example.com/touched", "yes")
	if n := hook.calls.Load(); n != 3 {
		t.Errorf("the hook was called %d times; want 3: write the status, see it, see the annotation", n)
	}
}

const ignoreStatusCompositeManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, ignoreStatusChanges: true, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`

// TestIgnoreStatusChangesHidesOwnStatus: under ignoreStatusChanges the engine's own
// status write wakes nothing, even when the hook answers a new status every call
// (which would loop otherwise); the next change by someone else shows it.
func TestIgnoreStatusChangesHidesOwnStatus(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, nil)
	hook.set(func(map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"call": hook.calls.Load()}, "children": []any{}}
	})
	create(t, ccGVR, "", ignoreStatusCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the first status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "call"); got != int64(1) {
			return fmt.Errorf("status.call = %v", got)
		}
		return nil
	})
	annotate(t, parentsGVR, ns, "p", "example.com/touched", "yes")
	hook.waitForAnnotation(t, "example.com/touched", "yes")
	for i, req := range hook.seen() {
		parent := req["parent"].(map[string]any)
		if i > 0 && field(parent, "metadata", "annotations", "example.com/touched") != "yes" {
			t.Errorf("call %d was woken by the engine's own status write: status %v", i+1, parent["status"])
		}
	}
	if n := hook.calls.Load(); n != 2 {
		t.Errorf("the hook was called %d times; want 2", n)
	}
}

const statusDecoratorManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  resources:
  - {apiVersion: test.metalambda.dev/v1, resource: parents, ignoreStatusChanges: %[3]v, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  attachments:
  - {apiVersion: v1, resource: configmaps}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`

// TestDecoratorHookSeesItsOwnStatus: a decorator's status and label writes are shown
// to its hook at one more sync, as upstream's decorator syncs on every update of its
// target; a hook that answers the same again is not called after that.
func TestDecoratorHookSeesItsOwnStatus(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		obj := req["object"].(map[string]any)
		name := field(obj, "metadata", "name").(string)
		if field(obj, "status", "phase") == "recorded" {
			return 200, map[string]any{"labels": map[string]any{"recorded": "seen"}, "attachments": []any{}}
		}
		return 200, map[string]any{"status": map[string]any{"phase": "recorded"}, "attachments": []any{configMap(name+"-work", nil, nil)}}
	})
	create(t, dcGVR, "", statusDecoratorManifest, ns, hook.URL, false)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the hook saw its status and labelled the target", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := o.GetLabels()["recorded"]; got != "seen" {
			return fmt.Errorf("labels %v", o.GetLabels())
		}
		return nil
	})
	env.WaitGone(t, "the attachment is dropped", configMapsGVR, ns, "p-work")
	hook.waitFor(t, "the hook is shown its label", func(req map[string]any) bool {
		return field(req["object"].(map[string]any), "metadata", "labels", "recorded") == "seen"
	})
	annotate(t, parentsGVR, ns, "p", "example.com/touched", "yes")
	hook.waitFor(t, "the hook is shown the annotation", func(req map[string]any) bool {
		return field(req["object"].(map[string]any), "metadata", "annotations", "example.com/touched") == "yes"
	})
	// Calls: write the status and the attachment; see the attachment; see the status
	// and write the label; see the label; see the annotation. The attachment's
	// deletion and the status can share a call, so 4 or 5; a loop would make more.
	if n := hook.calls.Load(); n > 5 {
		t.Errorf("the hook was called %d times; want at most 5", n)
	}
}

// TestDecoratorIgnoreStatusChangesHidesOwnStatus: under ignoreStatusChanges a
// decorator's own status write wakes nothing.
func TestDecoratorIgnoreStatusChangesHidesOwnStatus(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, nil)
	hook.set(func(map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"call": hook.calls.Load()}}
	})
	create(t, dcGVR, "", statusDecoratorManifest, ns, hook.URL, true)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the first status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "call"); got != int64(1) {
			return fmt.Errorf("status.call = %v", got)
		}
		return nil
	})
	annotate(t, parentsGVR, ns, "p", "example.com/touched", "yes")
	hook.waitFor(t, "the hook is shown the annotation", func(req map[string]any) bool {
		return field(req["object"].(map[string]any), "metadata", "annotations", "example.com/touched") == "yes"
	})
	if n := hook.calls.Load(); n != 2 {
		t.Errorf("the hook was called %d times; want 2: the status write woke it", n)
	}
}

// annotate sets one annotation of an object, as someone other than the engine.
func annotate(t *testing.T, gvr schema.GroupVersionResource, ns, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Patch(kubetest.Context(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// seen returns the requests the hook has received, oldest first.
func (h *hookServer) seen() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.requests...)
}

// waitFor waits until the hook has received a request that ok accepts.
func (h *hookServer) waitFor(t *testing.T, what string, ok func(req map[string]any) bool) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, what, func(context.Context) (bool, error) {
		for _, req := range h.seen() {
			if ok(req) {
				return true, nil
			}
		}
		return false, nil
	})
}

// waitForAnnotation waits until a composite hook is shown its parent with annotation
// key=value.
func (h *hookServer) waitForAnnotation(t *testing.T, key, value string) {
	t.Helper()
	h.waitFor(t, "the hook is shown "+key+"="+value, func(req map[string]any) bool {
		return field(req["parent"].(map[string]any), "metadata", "annotations", key) == value
	})
}

// waitForStatus waits until a composite hook is shown its parent with status[key] =
// value (numbers as JSON decodes them, float64).
func (h *hookServer) waitForStatus(t *testing.T, key string, value any) {
	t.Helper()
	h.waitFor(t, fmt.Sprintf("the hook is shown its status %s=%v", key, value), func(req map[string]any) bool {
		return field(req["parent"].(map[string]any), "status", key) == value
	})
}
