//go:build integration

package engine

import (
	"context"
	"fmt"
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
	waitFor(t, "the valid child is created", configMapsGVR, ns, "good", nil)
	waitFor(t, "the status is written though a child failed", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "answered"); got != "yes" {
			return fmt.Errorf("status.answered = %v", got)
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "a SyncError names the child that failed", func(context.Context) (bool, error) {
		for _, e := range events(t, ns, "p") {
			if e.Reason == "SyncError" && strings.Contains(e.Message, "Not_A_Valid_Name") {
				return true, nil
			}
		}
		return false, fmt.Errorf("events %v", events(t, ns, "p"))
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
	child := waitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
	waitFor(t, "the parent runs", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
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
	waitFor(t, "the terminating parent's status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "phase"); got != "terminating" {
			return fmt.Errorf("phase %v", got)
		}
		return nil
	})
	time.Sleep(time.Second) // the hook no longer lists the child; the engine must leave it
	if now := mustGet(t, configMapsGVR, ns, "p-0"); now.GetUID() != child.GetUID() || now.GetDeletionTimestamp() != nil {
		t.Errorf("the engine deleted or replaced the child of a terminating parent without a finalize hook")
	}
	if _, err := parents.Patch(kubetest.Context(t), "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the garbage collector deletes the child with its parent", configMapsGVR, ns, "p-0")
}
