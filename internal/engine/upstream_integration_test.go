//go:build integration

package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// Behaviour that matches upstream Metacontroller where this engine once differed.

const plainCompositeManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync", timeout: 2s}
`

// When a child cannot be written, the parent's status is still written from the
// hook's answer, and the sync fails with a SyncError naming the child.
func TestStatusIsWrittenWhenAChildWriteFails(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) {
		return 200, map[string]any{
			"status":   map[string]any{"answered": "yes"},
			"children": []any{configMap("good", map[string]any{"k": "v"}, nil), configMap("Not_A_Valid_Name", nil, nil)},
		}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the valid child is created", configMapsGVR, ns, "good", nil)
	env.WaitFor(t, "the status is written though a child failed", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "answered"); got != "yes" {
			return fmt.Errorf("status.answered = %v", got)
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "a SyncError names the child that failed", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "", "p") {
			if e.Reason == "SyncError" && strings.Contains(e.Message, "Not_A_Valid_Name") {
				return true, nil
			}
		}
		return false, fmt.Errorf("events %v", env.Events(t, ns, "", "p"))
	})
}

// A parent being deleted, held by someone else's finalizer, is still synced when the
// controller has no finalize hook: the sync hook is called and its status written,
// but the engine does not touch the children (the garbage collector owns them now).
func TestTerminatingParentWithoutFinalizeHookIsSynced(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		if field(parent, "metadata", "deletionTimestamp") != nil {
			return 200, map[string]any{"status": map[string]any{"phase": "terminating"}, "children": []any{}}
		}
		return 200, map[string]any{"status": map[string]any{"phase": "running"}, "children": []any{configMap("p-0", map[string]any{"k": "v"}, nil)}}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, `
apiVersion: test.metalambda.dev/v1
kind: Parent
metadata: {name: p, finalizers: [test.metalambda.dev/hold]}
spec: {size: 1}
`)
	child := env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
	env.WaitFor(t, "the parent runs", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "phase"); got != "running" {
			return fmt.Errorf("phase %v", got)
		}
		return nil
	})
	parents := env.Dynamic.Resource(parentsGVR).Namespace(ns)
	if err := parents.Delete(kubetest.Context(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = parents.Patch(context.Background(), "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	env.WaitFor(t, "the terminating parent's status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "phase"); got != "terminating" {
			return fmt.Errorf("phase %v", got)
		}
		return nil
	})
	time.Sleep(time.Second) // the hook no longer lists the child; the engine must leave it
	if now := env.MustGet(t, configMapsGVR, ns, "p-0"); now.GetUID() != child.GetUID() || now.GetDeletionTimestamp() != nil {
		t.Errorf("the engine deleted or replaced the child of a terminating parent without a finalize hook")
	}
	if _, err := parents.Patch(kubetest.Context(t), "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "the garbage collector deletes the child with its parent", configMapsGVR, ns, "p-0")
}

// While the garbage collector deletes a parent's children first (foreground
// deletion), upstream calls the sync hook, not the finalize hook, writes the status
// and leaves the children alone; the finalize hook runs once the children are gone.
func TestForegroundDeletionSyncsBeforeFinalizing(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	// The child carries a finalizer of the test's own, which holds the garbage
	// collector, and so the parent's foreground deletion, until the test lets go.
	child := configMap("p-0", nil, nil)
	child["metadata"].(map[string]any)["finalizers"] = []any{"test.metalambda.dev/hold"}
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		switch {
		case req["finalizing"] == true:
			return 200, map[string]any{"finalized": true}
		case field(parent, "metadata", "deletionTimestamp") != nil:
			return 200, map[string]any{"status": map[string]any{"phase": "deleting"}, "children": []any{child}}
		}
		return 200, map[string]any{"status": map[string]any{"phase": "running"}, "children": []any{child}}
	})
	create(t, ccGVR, "", finalizerCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	configMaps := env.Dynamic.Resource(configMapsGVR).Namespace(ns)
	release := func(ctx context.Context) error {
		_, err := configMaps.Patch(ctx, "p-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() { _ = release(context.Background()) })
	env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
	env.WaitFor(t, "the parent runs", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "phase"); got != "running" {
			return fmt.Errorf("phase %v", got)
		}
		return nil
	})
	foreground := metav1.DeletePropagationForeground
	if err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Delete(kubetest.Context(t), "p", metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the sync hook's answer is written while the garbage collector holds the parent", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "phase"); got != "deleting" {
			return fmt.Errorf("phase %v", got)
		}
		return nil
	})
	for i, req := range hook.seen() {
		if req["finalizing"] == true {
			t.Fatalf("call %d finalized while the garbage collector still deleted the children", i+1)
		}
	}
	if err := release(kubetest.Context(t)); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "the parent is finalized once the child is gone", parentsGVR, ns, "p")
	hook.waitFor(t, "the finalize hook was called", func(req map[string]any) bool { return req["finalizing"] == true })
}

// The hook is shown its parent with the controller's finalizer at its first call, so
// the sync upstream runs when that finalizer's own update arrives shows it nothing new.
func TestHookIsShownItsFinalizerAtTheFirstCall(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"phase": "running"}, "children": []any{}}
	})
	create(t, ccGVR, "", finalizerCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	hook.waitForStatus(t, "phase", "running")
	first := hook.seen()[0]["parent"].(map[string]any)
	finalizers, _ := field(first, "metadata", "finalizers").([]any)
	if len(finalizers) != 1 || finalizers[0] != finalizerName(compositeFinalizerPrefix, ns) {
		t.Errorf("the first call showed finalizers %v", finalizers)
	}
	if n := hook.calls.Load(); n != 2 {
		t.Errorf("the hook was called %d times; want 2: one that writes the status, one that sees it", n)
	}
}

// A status write from a parent the cache shows older than the API server's is refused
// (a conflict) and the sync runs again from the newer parent. Upstream reads the
// parent again and writes over it, then syncs again on the events of both writes; when
// the other writer's event comes first, its hook too answers the newer parent, which
// is where this engine always ends.
func TestStatusWriteFromAStaleParentIsRetried(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	parents := env.Dynamic.Resource(parentsGVR).Namespace(ns)
	hook := newHookServer(t, nil)
	hook.set(func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		if hook.calls.Load() == 1 {
			// Someone else writes the status while the hook answers.
			p, err := parents.Get(context.Background(), "p", metav1.GetOptions{})
			if err == nil {
				p.Object["status"] = map[string]any{"other": "x"}
				_, err = parents.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Error(err)
			}
		}
		return 200, map[string]any{"status": map[string]any{"phase": "running", "other": field(parent, "status", "other")}, "children": []any{}}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the hook's answer to the newer parent is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "phase") != "running" || field(o.Object, "status", "other") != "x" {
			return fmt.Errorf("status %v", o.Object["status"])
		}
		return nil
	})
}

// A write of the parent's spec while its sync runs (a user's; the soak's writer
// changes a parent every 100 ms) makes the sync's status write conflict, and the
// parent is synced again at once from the newer spec. That is no failed sync, as
// upstream's status write retries its conflicts: no SyncError event, and
// metalambda_engine_syncs_total counts it as result "conflict", not "error", which
// alerts and the soak's "failed syncs in gateway windows" read.
func TestSpecWrittenDuringASyncIsNoFailedSync(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	engine := startEngine(t, ns)
	parents := env.Dynamic.Resource(parentsGVR).Namespace(ns)
	hook := newHookServer(t, nil)
	hook.set(func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		if hook.calls.Load() == 1 {
			patch := []byte(`{"spec":{"size":2}}`)
			if _, err := parents.Patch(context.Background(), "p", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}
		return 200, map[string]any{"status": map[string]any{"size": field(parent, "spec", "size")}, "children": []any{}}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the status answers the newer spec", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := fmt.Sprint(field(o.Object, "status", "size")); got != "2" {
			return fmt.Errorf("status.size = %s", got)
		}
		return nil
	})
	if n := engine.syncs(t, ns, "conflict"); n < 1 {
		t.Errorf("%v syncs counted as conflicts; want the first", n)
	}
	if n := engine.syncs(t, ns, "error"); n != 0 {
		t.Errorf("%v syncs counted as errors; want none", n)
	}
	for _, e := range env.Events(t, ns, "", "p") {
		if e.Reason == "SyncError" {
			t.Errorf("SyncError event: %s", e.Message)
		}
	}
}

// The hook is shown the children it asked for once the caches show all of them: the
// engine waits for its own writes, where upstream's work queue may or may not have
// gathered their events into one sync.
func TestHookIsShownAllItsChildrenOrNone(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		seen := len(req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any))
		var children []any
		for i := range 5 {
			children = append(children, configMap(fmt.Sprintf("c-%d", i), nil, nil))
		}
		return 200, map[string]any{"status": map[string]any{"children": seen}, "children": children}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	hook.waitForStatus(t, "children", float64(5))
	for i, req := range hook.seen() {
		if n := len(req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)); n != 0 && n != 5 {
			t.Errorf("call %d was shown %d of the 5 children the engine had created", i+1, n)
		}
	}
	if n := hook.calls.Load(); n != 3 {
		t.Errorf("the hook was called %d times; want 3: create the children, see them and write the status, see the status", n)
	}
}

// A child whose controller-uid label is taken away no longer matches its parent's
// generated selector: it is released, as upstream releases it, though the engine's
// cache, which holds labelled objects only, no longer shows it. The hook still asks
// for it, and its name is now held by an object the parent does not control.
func TestChildThatLosesItsSelectorLabelIsReleased(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) {
		return 200, map[string]any{"children": []any{configMap("p-0", map[string]any{"k": "v"}, nil)}}
	})
	create(t, ccGVR, "", plainCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, ControllerUIDLabel)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(kubetest.Context(t), "p-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the child is released", configMapsGVR, ns, "p-0", func(o *unstructured.Unstructured) error {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return fmt.Errorf("controller %v", ref)
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "a SyncError says the name is taken", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "", "p") {
			if e.Reason == "SyncError" && strings.Contains(e.Message, "is not controlled by") {
				return true, nil
			}
		}
		return false, nil
	})
}

// A customize answer serves a parent of the same generation for a limited time, as
// upstream's cache does (20 minutes; here shortened): an answer that depends on more
// than the spec, here on a label, is taken up once it expires.
func TestCustomizeAnswerExpires(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns, func(o *Options) { o.customizeTTL = 2 * time.Second })
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		if _, sync := req["children"]; !sync {
			set := field(parent, "metadata", "labels", "pick")
			return 200, map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "secrets", "labelSelector": map[string]any{"matchLabels": map[string]any{"set": set}},
			}}}
		}
		related, _ := field(req, "related", "Secret.v1").(map[string]any)
		return 200, map[string]any{"status": map[string]any{"related": strings.Join(slices.Sorted(maps.Keys(related)), ",")}, "children": []any{}}
	})
	for _, name := range []string{"a", "b"} {
		create(t, secretsGVR, ns, "{apiVersion: v1, kind: Secret, metadata: {name: %s, labels: {set: %s}}}", name, name)
	}
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  resyncPeriodSeconds: 1
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
    customize: {webhook: {url: "%[2]s/customize"}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: p, labels: {pick: a}}, spec: {}}")
	related := func(want string) func(*unstructured.Unstructured) error {
		return func(o *unstructured.Unstructured) error {
			if got := field(o.Object, "status", "related"); got != want {
				return fmt.Errorf("status.related = %v", got)
			}
			return nil
		}
	}
	env.WaitFor(t, "the hook is shown Secret a", parentsGVR, ns, "p", related("a"))
	patch := `{"metadata":{"labels":{"pick":"b"}}}`
	if _, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Patch(kubetest.Context(t), "p", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the customize answer expires and the hook is shown Secret b", parentsGVR, ns, "p", related("b"))
}
