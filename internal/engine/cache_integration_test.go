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

const relatedCompositeManifest = `
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
    sync: {webhook: {url: "%[2]s/sync"}}
    customize: {webhook: {url: "%[2]s/customize"}}
`

// childrenAndRelated answers the customize hook with the Secrets labelled related=yes,
// and the sync hook with ConfigMaps <parent>-0 and <parent>-1 holding value, and a
// status counting the ConfigMaps and related Secrets it was shown.
func childrenAndRelated(value string) func(req map[string]any) (int, any) {
	return func(req map[string]any) (int, any) {
		if _, sync := req["children"]; !sync {
			return 200, map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "secrets", "labelSelector": map[string]any{"matchLabels": map[string]any{"related": "yes"}},
			}}}
		}
		name := field(req["parent"].(map[string]any), "metadata", "name").(string)
		children := []any{
			configMap(name+"-0", map[string]any{"value": value}, nil),
			configMap(name+"-1", map[string]any{"value": value}, nil),
		}
		related, _ := field(req, "related", "Secret.v1").(map[string]any)
		seen, _ := field(req, "children", "ConfigMap.v1").(map[string]any)
		return 200, map[string]any{"children": children, "status": map[string]any{"configMaps": len(seen), "related": len(related)}}
	}
}

// TestChildCacheHoldsOnlyLabelledObjects: with generateSelector, the engine caches
// only ConfigMaps that carry the controller-uid label, and nothing at all of the
// others. Everything the hook and the parent see stays as with a full cache: a name
// taken by an unlabelled object is refused (the create tells), a labelled orphan is
// adopted, a child edited by someone else is corrected, and a related object's change
// syncs the parent.
func TestChildCacheHoldsOnlyLabelledObjects(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newHookServer(t, childrenAndRelated("one"))
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: unrelated}, data: {value: mine}}")
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: p-1}, data: {value: stranger}}")
	create(t, ccGVR, "", relatedCompositeManifest, ns, hook.URL)
	parent := create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: p}, spec: {size: 2}}")

	t.Run("unlabelled objects are not cached", func(t *testing.T) {
		env.WaitFor(t, "p-0 is created", configMapsGVR, ns, "p-0", nil)
		ct := hostedChildType(t, eng, ns)
		if _, cached := ct.sub.Get(ns, "unrelated"); cached {
			t.Error("an unlabelled ConfigMap is in the child cache")
		}
		// Parents, ConfigMap children (labelled only), related Secrets, the
		// manager's two controller kinds, its two namespaced controller kinds and
		// Functions (their CRDs are installed): no informer of every ConfigMap.
		if n := eng.mgr.env.informers.Active(); n != 8 {
			t.Errorf("%d informers run, want 8", n)
		}
		// The API server answered the create before the watch delivered it.
		kubetest.Eventually(t, 10*time.Second, "the child p-0 reaches the child cache", func(context.Context) (bool, error) {
			_, cached := ct.sub.Get(ns, "p-0")
			return cached, nil
		})
		if cm, _ := ct.sub.Get(ns, "p-0"); cm.GetManagedFields() != nil {
			t.Error("the child cache keeps managedFields")
		}
	})

	t.Run("a name taken by an unlabelled object is refused", func(t *testing.T) {
		kubetest.Eventually(t, 30*time.Second, "a SyncError event naming p-1", func(context.Context) (bool, error) {
			for _, e := range env.Events(t, ns, "", "p") {
				if e.Reason == "SyncError" && strings.Contains(e.Message, "p-1 exists and is not controlled by") {
					return true, nil
				}
			}
			return false, nil
		})
		stranger := env.MustGet(t, configMapsGVR, ns, "p-1")
		if ref := metav1.GetControllerOf(stranger); ref != nil || field(stranger.Object, "data", "value") != "stranger" {
			t.Errorf("the stranger was touched: controller %v, data %v", ref, stranger.Object["data"])
		}
	})

	t.Run("a labelled orphan is adopted and shown to the hook", func(t *testing.T) {
		// The name freed, the engine would create p-1 itself before the orphan
		// exists: the hook fails (a failing hook changes nothing) while the stranger
		// makes way for the orphan. A sync after the hook failed is one that saw it.
		hook.set(func(map[string]any) (int, any) { return 500, "down while the orphan is made" })
		calls := hook.calls.Load()
		updateParentValue(t, ns, "p", "swap")
		kubetest.Eventually(t, 30*time.Second, "a sync sees the failing hook", func(context.Context) (bool, error) {
			return hook.calls.Load() > calls, nil
		})
		if err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Delete(kubetest.Context(t), "p-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitGone(t, "the stranger is gone", configMapsGVR, ns, "p-1")
		orphan := create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: p-1, labels: {controller-uid: %s}}, data: {value: orphan}}", parent.GetUID())
		hook.set(childrenAndRelated("one"))
		updateParentValue(t, ns, "p", "adopt")
		adopted := env.WaitFor(t, "the orphan is adopted and updated", configMapsGVR, ns, "p-1", func(o *unstructured.Unstructured) error {
			if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != parent.GetUID() {
				return fmt.Errorf("controller %v", ref)
			}
			if v := field(o.Object, "data", "value"); v != "one" {
				return fmt.Errorf("value %v", v)
			}
			return nil
		})
		if adopted.GetUID() != orphan.GetUID() {
			t.Error("the orphan was replaced instead of adopted")
		}
		env.WaitFor(t, "the status counts both children", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
			if n := field(o.Object, "status", "configMaps"); n != int64(2) {
				return fmt.Errorf("status.configMaps = %v", n)
			}
			return nil
		})
	})

	t.Run("a child edited by someone else is corrected", func(t *testing.T) {
		patch := []byte(`{"data":{"value":"tampered"}}`)
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(kubetest.Context(t), "p-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitFor(t, "p-0 is corrected", configMapsGVR, ns, "p-0", func(o *unstructured.Unstructured) error {
			if v := field(o.Object, "data", "value"); v != "one" {
				return fmt.Errorf("value %v", v)
			}
			return nil
		})
	})

	t.Run("a related object's change syncs the parent", func(t *testing.T) {
		create(t, secretsGVR, ns, "{apiVersion: v1, kind: Secret, metadata: {name: related, labels: {related: \"yes\"}}}")
		env.WaitFor(t, "the status counts the related Secret", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
			if n := field(o.Object, "status", "related"); n != int64(1) {
				return fmt.Errorf("status.related = %v", n)
			}
			return nil
		})
	})
}

// hostedChildType is the ConfigMap child type of the controller named ns.
func hostedChildType(t *testing.T, eng *engineUnderTest, ns string) *childType {
	t.Helper()
	eng.mgr.mu.Lock()
	defer eng.mgr.mu.Unlock()
	h := eng.mgr.hosted[controllerKey{kind: CompositeKind, name: ns}]
	if h == nil {
		t.Fatal("the controller is not hosted")
	}
	return h.controller.children[0]
}

// TestFieldDroppedFromCreatedChildIsRemoved: a child is created with a plain create,
// so its fields first belong to the engine's field manager as an Update; once the
// hook stops returning a field, the next apply still removes it (the fields are handed
// to the engine's apply first), while a field someone else set stays.
func TestFieldDroppedFromCreatedChildIsRemoved(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	data := map[string]any{"a": "1", "b": "2"}
	hook := newHookServer(t, nil)
	hook.set(func(req map[string]any) (int, any) {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		return 200, map[string]any{"children": []any{configMap("p-0", maps.Clone(data), nil)}}
	})
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	created := env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
	if got := managers(created); !slices.Contains(got, "metalambda/Update") || slices.Contains(got, "metalambda/Apply") {
		t.Fatalf("a created child has managers %v, want metalambda/Update and no apply yet", got)
	}
	patch := []byte(`{"data":{"other":"kept"}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(kubetest.Context(t), "p-0", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	delete(data, "b")
	hook.mu.Unlock()
	updated := env.WaitFor(t, "b is removed, a and other are kept", configMapsGVR, ns, "p-0", func(o *unstructured.Unstructured) error {
		d := o.Object["data"].(map[string]any)
		if _, has := d["b"]; has || d["a"] != "1" || d["other"] != "kept" {
			return fmt.Errorf("data = %v", d)
		}
		return nil
	})
	if updated.GetUID() != created.GetUID() {
		t.Error("InPlace recreated the child")
	}
	if got := managers(updated); !slices.Contains(got, "metalambda/Apply") || slices.Contains(got, "metalambda/Update") {
		t.Errorf("an updated child has managers %v, want metalambda/Apply only", got)
	}
}

// managers lists an object's field managers of the main resource as manager/operation.
func managers(obj *unstructured.Unstructured) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		if m.Subresource == "" {
			out = append(out, m.Manager+"/"+string(m.Operation))
		}
	}
	return out
}
