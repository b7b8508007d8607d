//go:build integration

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

const selectorCompositeManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync"}
`

// keepObserved is a hook that wants exactly the children it is shown.
func keepObserved(req map[string]any) (int, any) {
	var children []any
	for _, c := range req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any) {
		children = append(children, c)
	}
	return 200, map[string]any{"children": children, "status": map[string]any{"children": len(children)}}
}

func TestAdoptionAndRelease(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	orphan := create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: orphan, labels: {app: a}}}")
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: stranger, labels: {app: b}}}")
	hook := newHookServer(t, keepObserved)
	create(t, ccGVR, "", selectorCompositeManifest, ns, hook.URL)
	parent := create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: p}, spec: {selector: {matchLabels: {app: a}}}}")

	adopted := env.WaitFor(t, "the matching orphan is adopted", configMapsGVR, ns, "orphan", func(o *unstructured.Unstructured) error {
		if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != parent.GetUID() {
			return fmt.Errorf("controller = %v", ref)
		}
		return nil
	})
	if adopted.GetUID() != orphan.GetUID() {
		t.Fatal("the orphan was replaced instead of adopted")
	}
	if ref := metav1.GetControllerOf(env.MustGet(t, configMapsGVR, ns, "stranger")); ref != nil {
		t.Fatalf("a ConfigMap that does not match the selector was adopted: %v", ref)
	}

	// Relabel the child: it no longer matches and must be released, not deleted.
	patch := []byte(`{"metadata":{"labels":{"app":"elsewhere"}}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(kubetest.Context(t), "orphan", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the relabelled child is released", configMapsGVR, ns, "orphan", func(o *unstructured.Unstructured) error {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return fmt.Errorf("still controlled by %s", ref.Name)
		}
		return nil
	})
}

const finalizerCompositeManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
    finalize: {webhook: {url: "%[2]s/finalize"}}
`

func TestFinalizeHook(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	finalized := make(chan struct{})
	allow := false
	hook := newHookServer(t, nil)
	hook.set(func(req map[string]any) (int, any) {
		if req["finalizing"] == true {
			if !allow {
				return 200, map[string]any{"finalized": false, "status": map[string]any{"phase": "Cleaning"}, "resyncAfterSeconds": 0.5}
			}
			select {
			case <-finalized:
			default:
				close(finalized)
			}
			return 200, map[string]any{"finalized": true}
		}
		return 200, map[string]any{"children": []any{configMap("p-data", map[string]any{"k": "v"}, nil)}}
	})
	create(t, ccGVR, "", finalizerCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	finalizer := finalizerName(compositeFinalizerPrefix, ns)
	env.WaitFor(t, "the parent carries the finalizer", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if !slices.Contains(o.GetFinalizers(), finalizer) {
			return fmt.Errorf("finalizers = %v", o.GetFinalizers())
		}
		return nil
	})
	env.WaitFor(t, "the child exists", configMapsGVR, ns, "p-data", nil)
	if err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Delete(kubetest.Context(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the finalize hook runs and reports Cleaning", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "phase") != "Cleaning" {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	hook.mu.Lock()
	allow = true
	hook.mu.Unlock()
	env.WaitGone(t, "the parent is deleted once finalized", parentsGVR, ns, "p")
	<-finalized
}

func TestDeletingTheControllerReleasesFinalizers(t *testing.T) {
	ns := parentHeldByFinalizer(t)
	if err := env.Dynamic.Resource(ccGVR).Delete(kubetest.Context(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "deleting the CompositeController frees its parents", parentsGVR, ns, "p")
}

// TestDeletingABrokenControllerReleasesFinalizers: a controller whose spec was edited
// into one that cannot be built (it stops, Ready=False) still frees its parents when
// it is deleted.
func TestDeletingABrokenControllerReleasesFinalizers(t *testing.T) {
	ns := parentHeldByFinalizer(t)
	ctx := kubetest.Context(t)
	patch := `{"spec": {"childResources": [{"apiVersion": "v1", "resource": "configmaps"}, {"apiVersion": "v1", "resource": "nosuchthings"}]}}`
	if _, err := env.Dynamic.Resource(ccGVR).Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the edited controller cannot be built", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "False", "ResourceNotFound")
	})
	if err := env.Dynamic.Resource(ccGVR).Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "deleting the stopped CompositeController frees its parents", parentsGVR, ns, "p")
}

// parentHeldByFinalizer runs a CompositeController (named as the namespace it
// returns) whose finalize hook never lets go, and a parent p of it, deleted and
// held by the controller's finalizer.
func parentHeldByFinalizer(t *testing.T) string {
	t.Helper()
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		return 200, map[string]any{"finalized": false} // never lets go
	})
	create(t, ccGVR, "", finalizerCompositeManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the parent carries the finalizer", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if len(o.GetFinalizers()) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	if err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Delete(kubetest.Context(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The finalize call may come before Delete returns: look for it among the requests.
	kubetest.Eventually(t, 30*time.Second, "the finalize hook is called", func(context.Context) (bool, error) {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		for _, req := range hook.requests {
			if req["finalizing"] == true {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := env.Get(kubetest.Context(t), parentsGVR, ns, "p"); err != nil {
		t.Fatalf("the parent went away although the hook never finalized: %v", err)
	}
	return ns
}

func TestMissingStatusSubresourceIsReportedNotLooped(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) { return 200, map[string]any{} })
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: nostatuses, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL)
	create(t, nostatusGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Nostatus, metadata: {name: nostatus}, spec: {}}")
	env.WaitFor(t, "the controller reports the missing status subresource", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "False", "ParentStatusSubresourceMissing")
	})
	time.Sleep(time.Second)
	if n := hook.calls.Load(); n != 0 {
		t.Fatalf("the hook was called %d times for a parent without status subresource", n)
	}
	if gen := env.MustGet(t, nostatusGVR, ns, "nostatus").GetGeneration(); gen != 1 {
		t.Fatalf("the parent's generation moved to %d", gen)
	}
}

func TestUnsupportedFieldsAreReported(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, keepObserved)
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}, revisionHistory: {fieldPaths: [spec]}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: RollingRecreate}}
  hooks: {sync: {webhook: {url: "%[2]s", etag: {enabled: true}}}, preUpdateChild: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL)
	cc := env.WaitFor(t, "the controller runs and lists what it does not support", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		if err := expectCondition(o, ConditionReady, "True", "Running"); err != nil {
			return err
		}
		return expectCondition(o, ConditionSupported, "False", "UnsupportedFields")
	})
	msg := conditionMessage(cc, ConditionSupported)
	if !strings.Contains(msg, "preUpdateChild") {
		t.Errorf("Supported message %q does not mention preUpdateChild", msg)
	}
	for _, supported := range []string{"RollingRecreate", "revisionHistory"} {
		if strings.Contains(msg, supported) {
			t.Errorf("Supported message %q mentions %q, which is supported", msg, supported)
		}
	}
	if strings.Contains(msg, "etag") {
		t.Errorf("Supported message %q lists webhook.etag, which is supported", msg)
	}
}

// TestControllerForLaterCRD creates a CompositeController before its parent CRD exists.
func TestControllerForLaterCRD(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) { return 200, map[string]any{"status": map[string]any{"seen": true}} })
	plural := "lates" + strings.ReplaceAll(ns[len(ns)-6:], "-", "")
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: %[3]s, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL, plural)
	env.WaitFor(t, "the controller reports the unknown resource", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "False", "ResourceNotFound")
	})
	crd := kubetest.SchemalessCRD(testGroup, "Late"+plural, plural, strings.ToLower("Late"+plural))
	if _, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(kubetest.Context(t), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	env.WaitFor(t, "the controller starts once the CRD exists", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "True", "Running")
	})
	gvr := parentsGVR
	gvr.Resource = plural
	kubetest.Eventually(t, 30*time.Second, "a parent of the new CRD can be created", func(ctx context.Context) (bool, error) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metalambda.dev/v1", "kind": crd.Spec.Names.Kind, "metadata": map[string]any{"name": "x", "labels": map[string]any{engineLabel: ns}}, "spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}
		_, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, err
	})
	env.WaitFor(t, "the new parent is synced", gvr, ns, "x", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "seen") != true {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
}

func expectCondition(o *unstructured.Unstructured, typ, status, reason string) error {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			if m["status"] != status || m["reason"] != reason {
				return fmt.Errorf("condition %s = %s/%s (%v), want %s/%s", typ, m["status"], m["reason"], m["message"], status, reason)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s condition in %v", typ, o.Object["status"])
}

func conditionMessage(o *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
}
